package rewards

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestControllerStateRoundTrip is test_controller_resume.py: save/load
// restores tau, beta, meta enabled/lr/last grads.
func TestControllerStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), ControllerStateFile)
	m := DefaultMetaController()
	m.Enabled, m.LR, m.Method = true, 0.05, "analytic"
	s := NewControllerState(0.37, 0.08, m)
	s, _ = TauController{Enabled: true, Target: 1, LR: 0.1}.Update(s, 0.6, 1, 1)
	s = m.Apply(s, ControllerGradients{Tau: 0.25, Beta: -0.5, HasTau: true, HasBeta: true}, 1, 0, 0)
	if err := SaveControllerState(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := LoadControllerState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != s {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}
	if !got.Meta.Controller.Enabled || got.Meta.Controller.LearningRate != 0.05 || got.Meta.Controller.LastTauGrad != 0.25 || got.Meta.Controller.LastBetaGrad != -0.5 {
		t.Errorf("meta block not restored: %+v", got.Meta)
	}
	// the file holds exactly the spec's keys.
	var raw map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"beta", "tau", "tau_log", "tau_entropy_ema", "meta"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("key %q missing from %s", k, b)
		}
	}
	meta := raw["meta"].(map[string]any)
	if meta["version"].(float64) != 1 {
		t.Errorf("meta.version = %v, want 1", meta["version"])
	}
	ctl := meta["controller"].(map[string]any)
	for _, k := range []string{"enabled", "method", "learning_rate", "tau_learning_rate", "beta_learning_rate",
		"beta_grad_clip", "update_interval", "objective", "analytic_steps", "optimizer", "truncation_steps",
		"use_hessian", "last_tau_grad", "last_beta_grad"} {
		if _, ok := ctl[k]; !ok {
			t.Errorf("meta.controller.%s missing", k)
		}
	}
	if len(raw) != 5 || len(ctl) != 14 {
		t.Errorf("extra keys: %s", b)
	}
	// no temp files left behind.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only %s", len(entries), ControllerStateFile)
	}
}

// TestControllerStatePartialBackfill: {"tau":.25,"beta":.15} backfills
// tau_log and a finite EMA (test_controller_resume.py, spec §2.4).
func TestControllerStatePartialBackfill(t *testing.T) {
	path := filepath.Join(t.TempDir(), ControllerStateFile)
	if err := os.WriteFile(path, []byte(`{"tau": 0.25, "beta": 0.15}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadControllerState(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tau != 0.25 || s.Beta != 0.15 || !near(s.TauLog, math.Log(0.25), 1e-15) || s.TauEntropyEMA != 0.25 || !s.EntropyHistory {
		t.Errorf("backfilled state = %+v; want tau_log ln .25, ema .25", s)
	}
	if s.Meta.Version != 1 || s.Meta.Controller.UpdateInterval != 1 || s.Meta.Controller.Method != MetaMethodAnalytic {
		t.Errorf("default meta block = %+v", s.Meta)
	}
}

func TestControllerStateLoadEdges(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		body string
		err  error
		tau  float64
	}{
		{name: "non-numeric tau", body: `{"tau": "x", "beta": 0.1}`, err: ErrState},
		{name: "missing beta", body: `{"tau": 0.1}`, err: ErrState},
		{name: "not json", body: `{`, err: ErrState},
		{name: "future version", body: `{"tau": 1, "beta": 0, "meta": {"version": 2}}`, err: ErrState},
		{name: "null ema and tau_log", body: `{"tau": 0.5, "beta": 0, "tau_log": null, "tau_entropy_ema": null}`, tau: 0.5},
		{name: "tau 0 floors tau_log", body: `{"tau": 0, "beta": 0}`, tau: 0},
		{name: "partial meta, interval clamped", body: `{"tau": 1, "beta": 0, "meta": {"controller": {"enabled": true, "update_interval": 0}}}`, tau: 1},
	}
	for i, tc := range tests {
		path := filepath.Join(dir, string(rune('a'+i))+".json")
		os.WriteFile(path, []byte(tc.body), 0o644)
		s, err := LoadControllerState(path)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if tc.err != nil {
			continue
		}
		if s.Tau != tc.tau || !isFinite(s.TauLog) || !isFinite(s.TauEntropyEMA) || s.Meta.Controller.UpdateInterval < 1 {
			t.Errorf("%s: state %+v", tc.name, s)
		}
	}
	if _, err := LoadControllerState(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	if err := SaveControllerState(filepath.Join(dir, "x.json"), ControllerState{Tau: math.NaN()}); !errors.Is(err, ErrNonFinite) {
		t.Errorf("saving NaN tau: err = %v", err)
	}
	if err := SaveControllerState(filepath.Join(dir, "no", "such", "dir.json"), NewControllerState(1, 0, MetaController{})); err == nil {
		t.Errorf("saving into a missing directory succeeded")
	}
}
