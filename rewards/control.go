package rewards

import "math"

// Controllers bundles the three controllers the step updates once per
// optimiser step from the step's global statistics (DESIGN §3).
type Controllers struct {
	// Tau steers τ toward a target weight entropy.
	Tau TauController
	// Beta steers β toward a KL target.
	Beta BetaController
	// Meta, when enabled, replaces Tau and Beta by gradient steps.
	Meta MetaController
	// Backprop is the truncated objective's callback (nil: analytic).
	Backprop BackpropFunc
	// Objective is the training objective. Under a GRPO objective the
	// meta-controller's entropy signal is the weight entropy; under the
	// MaxEnt objectives (and the zero value) it is the token-mean policy
	// entropy when known (spec §2.3 ControllerMetaContext.entropy_value).
	Objective Objective
}

// ControllerInputs are the step statistics the controllers read.
type ControllerInputs struct {
	// Step is the optimiser step just taken.
	Step int64
	// WeightEntropy is the batch mean listwise weight entropy (NaN if none).
	WeightEntropy float64
	// PolicyEntropy is the token-mean policy entropy; NaN if unknown. Under
	// a MaxEnt objective the meta-controller prefers it to WeightEntropy
	// (spec §2.3).
	PolicyEntropy float64
	// KL is the measured KL to the reference (NaN if unknown).
	KL float64
	// LRScale is current LR / base LR (1 without a schedule).
	LRScale float64
}

// ControllerUpdate says what Controllers.Update did.
type ControllerUpdate struct {
	// Tau is the tau controller's report (zero when the meta-controller ran).
	Tau TauReport
	// MetaRan is true when the meta-controller stepped; Grads are its gradients.
	MetaRan bool
	Grads   ControllerGradients
}

// Update returns the controller state after one optimiser step. With the
// meta-controller enabled, it runs on its interval and the plain controllers
// are bypassed (the TRL rule, spec §2.3; an unknown method falls back to
// the analytic objective and updates, as the original's
// build_controller_objective) and its entropy signal is the policy entropy
// under a MaxEnt objective, the weight entropy under GRPO (never the policy
// entropy: a GRPO batch without weights gives no τ gradient); otherwise τ
// follows the weight entropy (§2.1) and β the KL (§2.2). s is not modified.
func (c Controllers) Update(s ControllerState, in ControllerInputs) (ControllerState, ControllerUpdate) {
	var up ControllerUpdate
	if c.Meta.Enabled {
		if !c.Meta.ShouldRun(in.Step) {
			return s, up
		}
		sig := MetaSignals{Entropy: in.WeightEntropy, TargetEntropy: math.NaN(), KL: in.KL, KLTarget: c.Beta.Target}
		if !c.Objective.IsGRPO() && isFinite(in.PolicyEntropy) {
			sig.Entropy = in.PolicyEntropy
		}
		// The targets are the tau and beta controllers' own, read whether or
		// not those controllers run: the meta-controller replaces them.
		if h := c.Tau.TargetAt(in.Step); h > 0 {
			sig.TargetEntropy = h
		}
		g, ok := c.Meta.BuildObjective(c.Backprop).Gradients(sig)
		if ok {
			s = c.Meta.Apply(s, g, in.LRScale, c.Tau.Min, c.Tau.Max)
			up.MetaRan, up.Grads = true, g
		}
		return s, up
	}
	s, up.Tau = c.Tau.Update(s, in.WeightEntropy, in.Step, in.LRScale)
	s.Beta = c.Beta.Update(s.Beta, in.KL)
	return s, up
}
