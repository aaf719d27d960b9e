package rewards

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// ControllerStateFile is the file name of the controller state in a run or
// checkpoint directory (spec §2.4).
const ControllerStateFile = "controller_state.json"

// ControllerStateVersion is the version written in the meta block.
const ControllerStateVersion = 1

// ControllerState is the controllers' state, saved as controller_state.json
// with exactly the original's keys (spec §2.4). It is a value: updates return
// a new state.
type ControllerState struct {
	// Beta is the KL / reference-tilt coefficient β.
	Beta float64 `json:"beta"`
	// Tau is the weight temperature τ.
	Tau float64 `json:"tau"`
	// TauLog is ln max(τ, 1e-8), the tau controller's log-space variable.
	TauLog float64 `json:"tau_log"`
	// TauEntropyEMA is the tau controller's weight-entropy EMA.
	TauEntropyEMA float64 `json:"tau_entropy_ema"`
	// Meta records the meta-controller settings and last gradients.
	Meta MetaState `json:"meta"`
	// EntropyHistory is false until the EMA has been initialised (by the
	// first tau update or by loading a file); not saved.
	EntropyHistory bool `json:"-"`
}

// MetaState is the "meta" block of controller_state.json.
type MetaState struct {
	// Version is ControllerStateVersion.
	Version int `json:"version"`
	// Controller holds the meta-controller settings and last gradients.
	Controller MetaControllerState `json:"controller"`
}

// MetaControllerState is the "meta.controller" block of controller_state.json.
type MetaControllerState struct {
	// Enabled is MetaController.Enabled.
	Enabled bool `json:"enabled"`
	// Method is MetaController.Method.
	Method string `json:"method"`
	// LearningRate is MetaController.LR.
	LearningRate float64 `json:"learning_rate"`
	// TauLearningRate is MetaController.TauLR.
	TauLearningRate float64 `json:"tau_learning_rate"`
	// BetaLearningRate is MetaController.BetaLR.
	BetaLearningRate float64 `json:"beta_learning_rate"`
	// BetaGradClip is MetaController.BetaGradClip.
	BetaGradClip float64 `json:"beta_grad_clip"`
	// UpdateInterval is MetaController.UpdateInterval (>= 1).
	UpdateInterval int64 `json:"update_interval"`
	// Objective is MetaController.Objective.
	Objective string `json:"objective"`
	// AnalyticSteps is MetaController.AnalyticSteps (>= 1).
	AnalyticSteps int `json:"analytic_steps"`
	// Optimizer is MetaController.Optimizer.
	Optimizer string `json:"optimizer"`
	// TruncationSteps is MetaController.TruncationSteps (>= 1).
	TruncationSteps int `json:"truncation_steps"`
	// UseHessian is MetaController.UseHessian.
	UseHessian bool `json:"use_hessian"`
	// LastTauGrad is the last τ gradient applied (0 before any).
	LastTauGrad float64 `json:"last_tau_grad"`
	// LastBetaGrad is the last β gradient applied (0 before any).
	LastBetaGrad float64 `json:"last_beta_grad"`
}

// NewControllerState returns the initial state for tau, beta and a
// meta-controller configuration; the entropy EMA starts at the first update.
func NewControllerState(tau, beta float64, meta MetaController) ControllerState {
	return ControllerState{
		Beta:          beta,
		Tau:           tau,
		TauLog:        math.Log(max(tau, tauLogFloor)),
		TauEntropyEMA: tau,
		Meta:          MetaState{Version: ControllerStateVersion, Controller: meta.State()},
	}
}

// State returns the meta block that records m.
func (m MetaController) State() MetaControllerState {
	return MetaControllerState{
		Enabled: m.Enabled, Method: m.Method, LearningRate: m.LR,
		TauLearningRate: m.TauLR, BetaLearningRate: m.BetaLR, BetaGradClip: m.BetaGradClip,
		UpdateInterval: m.UpdateInterval, Objective: m.Objective,
		AnalyticSteps: m.AnalyticSteps, Optimizer: m.Optimizer,
		TruncationSteps: m.TruncationSteps, UseHessian: m.UseHessian,
	}.clamped()
}

// clamped is c with its interval and step counts at least 1 (spec §2.4
// apply_state).
func (c MetaControllerState) clamped() MetaControllerState {
	c.UpdateInterval, c.AnalyticSteps, c.TruncationSteps = max(c.UpdateInterval, 1), max(c.AnalyticSteps, 1), max(c.TruncationSteps, 1)
	return c
}

// SaveControllerState writes s to path atomically: a temporary file in the
// same directory is written, synced and renamed over path. A state whose
// entropy EMA was never initialised is written with the EMA backfill value τ.
func SaveControllerState(path string, s ControllerState) error {
	if !isFinite(s.Tau) || !isFinite(s.Beta) {
		return fmt.Errorf("save controller state %s: tau=%v beta=%v: %w", path, s.Tau, s.Beta, ErrNonFinite)
	}
	s = backfill(s)
	s.Meta.Version = ControllerStateVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("save controller state %s: %w", path, err)
	}
	if err := atomicfile.WriteBytes(path, append(b, '\n')); err != nil {
		return fmt.Errorf("save controller state %s: %w", path, err)
	}
	return nil
}

// backfill fills the derived fields the original backfills (spec §2.4):
// tau_log = ln max(τ,1e-8) when non-finite, tau_entropy_ema = τ when
// non-finite or never initialised.
func backfill(s ControllerState) ControllerState {
	if !isFinite(s.TauLog) {
		s.TauLog = math.Log(max(s.Tau, tauLogFloor))
	}
	if !s.EntropyHistory || !isFinite(s.TauEntropyEMA) {
		s.TauEntropyEMA = s.Tau
	}
	return s
}

// LoadControllerState reads a controller_state.json (spec §2.4). tau and beta
// must be finite numbers (else ErrState: there is no running value to keep);
// a missing or non-numeric tau_log is backfilled with ln max(τ,1e-8), a
// missing tau_entropy_ema with τ, a missing meta block with the defaults; the
// meta interval and step counts are clamped to >= 1. The loaded EMA counts as
// initialised.
func LoadControllerState(path string) (ControllerState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ControllerState{}, fmt.Errorf("load controller state %s: %w", path, err)
	}
	s, err := decodeControllerState(b)
	if err != nil {
		return ControllerState{}, fmt.Errorf("load controller state %s: %w", path, err)
	}
	return s, nil
}

// decodeControllerState parses and backfills the JSON of a state file.
func decodeControllerState(b []byte) (ControllerState, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return ControllerState{}, fmt.Errorf("%w: %w", ErrState, err)
	}
	var s ControllerState
	var ok bool
	if s.Tau, ok = number(raw["tau"]); !ok {
		return ControllerState{}, fmt.Errorf("tau is missing or not a finite number: %w", ErrState)
	}
	if s.Beta, ok = number(raw["beta"]); !ok {
		return ControllerState{}, fmt.Errorf("beta is missing or not a finite number: %w", ErrState)
	}
	if s.TauLog, ok = number(raw["tau_log"]); !ok {
		s.TauLog = math.NaN()
	}
	s.TauEntropyEMA, s.EntropyHistory = number(raw["tau_entropy_ema"])
	s = backfill(s)
	s.EntropyHistory = true
	s.Meta = MetaState{Version: ControllerStateVersion, Controller: DefaultMetaController().State()}
	if m, present := raw["meta"]; present && string(m) != "null" {
		if err := json.Unmarshal(m, &s.Meta); err != nil {
			return ControllerState{}, fmt.Errorf("meta block: %w: %w", ErrState, err)
		}
	}
	switch s.Meta.Version {
	case 0:
		s.Meta.Version = ControllerStateVersion
	case ControllerStateVersion:
	default:
		return ControllerState{}, fmt.Errorf("meta version %d, want %d: %w", s.Meta.Version, ControllerStateVersion, ErrState)
	}
	s.Meta.Controller = s.Meta.Controller.clamped()
	return s, nil
}

// number decodes a finite JSON number; ok is false otherwise.
func number(m json.RawMessage) (float64, bool) {
	if m == nil {
		return 0, false
	}
	var v float64
	if err := json.Unmarshal(m, &v); err != nil || !isFinite(v) {
		return 0, false
	}
	return v, true
}
