package config

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestSetKeys: the keys a file, the environment and flags set, each once,
// aliases under their key; the defaults are not set.
func TestSetKeys(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs)
	if err := ParseFlags(fs, []string{"--generation.temperature", "0.5", "--role", "generator", "--train.steps", "9", "--config", "recipe:addition-grpo"}); err != nil {
		t.Fatal(err)
	}
	got, err := Sources{File: "recipe:addition-grpo", Env: []string{"MGRPO_TRAIN__STEPS=3", "MGRPO_OPTIM__LR=0.01", "HOME=/root"}, Flags: fs}.SetKeys()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cluster.role", "generation.temperature", "maxent.objective", "optim.lr", "task.digits", "task.name", "train.steps"}
	if !slices.Equal(got, want) {
		t.Errorf("SetKeys = %q, want %q", got, want)
	}
}

// TestWorkerKey: what a worker node takes from its own configuration.
func TestWorkerKey(t *testing.T) {
	for key, want := range map[string]bool{
		"cluster.seeds": true, "cluster.tls.ca": true, "model.device": true, "model.dtype": true, "trace.file": true,
		"output.prometheus_port": true, "output.pprof": true, "generation.temperature": false, "train.steps": false, "model.preset": false,
		"output.dir": false, "trace.otlp_endpoint": false,
	} {
		if got := WorkerKey(key); got != want {
			t.Errorf("WorkerKey(%q) = %v, want %v", key, got, want)
		}
	}
}
