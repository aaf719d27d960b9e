package rewards

import "math"

// TauEntropyEMADecay is the default decay of the weight-entropy EMA that the
// tau controller tracks (spec §2.1 _TAU_ENTROPY_EMA_DECAY).
const TauEntropyEMADecay = 0.9

// tauLogFloor keeps ln τ finite: tau_log = ln max(τ, 1e-8) (spec §2.1).
const tauLogFloor = 1e-8

// TauController steers τ so that the weight entropy tracks a target
// (spec §2.1 maybe_update_tau; config maxent_target_weight_entropy*, maxent_tau_*).
// Entropy below target makes τ grow, which flattens the weights.
type TauController struct {
	// Enabled turns the controller on (the original: a target is set).
	Enabled bool
	// Target is H*, the target weight entropy in nats, used when Anneal is false.
	Target float64
	// Anneal moves the target linearly from TargetStart to TargetFinal over
	// Horizon steps (the caller fills a missing end with Target).
	Anneal bool
	// TargetStart is the annealed target at step 0.
	TargetStart float64
	// TargetFinal is the annealed target from step Horizon on.
	TargetFinal float64
	// Horizon is the annealing length in steps; <= 0 means TargetFinal at once.
	Horizon int64
	// LR is the log-space learning rate (maxent_tau_lr, default 0: no update).
	LR float64
	// Min is the lower bound of τ (maxent_tau_min, default 0).
	Min float64
	// Max is the upper bound of τ; <= 0 means unbounded (maxent_tau_max).
	Max float64
	// WarmupSteps: no update while step <= max(0, WarmupSteps); the
	// original's -1 behaves as 0 (spec §8 quirk 5).
	WarmupSteps int64
	// EMADecay is the decay of the entropy EMA; 0 means TauEntropyEMADecay.
	EMADecay float64
}

// TargetAt returns the target entropy at a step (spec §2.1 step 4):
//
//	H*(s) = start + (final - start) · min(max(s,0), horizon) / horizon
func (c TauController) TargetAt(step int64) float64 {
	if !c.Anneal {
		return c.Target
	}
	if c.Horizon <= 0 {
		return c.TargetFinal
	}
	s := float64(min(max(step, 0), c.Horizon))
	return c.TargetStart + (c.TargetFinal-c.TargetStart)*s/float64(c.Horizon)
}

// Active reports whether the controller updates τ at this step (the logged
// tau_schedule_active, without the meta-controller condition).
func (c TauController) Active(step int64) bool {
	return c.Enabled && step > max(0, c.WarmupSteps)
}

// TauReport says what one tau update did.
type TauReport struct {
	// Target is the target entropy at this step.
	Target float64
	// Updated is true when τ was changed.
	Updated bool
}

// Update returns the state after one optimiser step's tau update from the
// step's global weight entropy h (spec §2.1 steps 1–7):
//
//	ema = d·ema + (1-d)·H;  err = H*(s) - ema
//	log τ += lr·lrScale·err;  τ = clamp(exp(log τ), Min, Max);  tau_log = ln max(τ,1e-8)
//
// s is not modified. A non-finite h leaves τ unchanged.
func (c TauController) Update(s ControllerState, h float64, step int64, lrScale float64) (ControllerState, TauReport) {
	rep := TauReport{Target: c.TargetAt(step)}
	lr := c.LR * max(lrScale, 0)
	if !s.EntropyHistory {
		s.TauEntropyEMA = h
		if !isFinite(h) {
			s.TauEntropyEMA = s.Tau
		}
		s.TauLog = math.Log(max(s.Tau, tauLogFloor))
		s.EntropyHistory = true
	}
	if !c.Active(step) || !isFinite(h) || !isFinite(rep.Target) {
		return s, rep
	}
	d := c.EMADecay
	if d == 0 {
		d = TauEntropyEMADecay
	}
	s.TauEntropyEMA = d*s.TauEntropyEMA + (1-d)*h
	e := rep.Target - s.TauEntropyEMA
	if math.Abs(e) < 1e-12 || lr == 0 {
		return s, rep
	}
	tau := math.Exp(s.TauLog + lr*e)
	tau = clampTau(tau, c.Min, c.Max)
	if !isFinite(tau) {
		return s, rep
	}
	s.Tau = tau
	s.TauLog = math.Log(max(tau, tauLogFloor))
	rep.Updated = true
	return s, rep
}

// clampTau applies τ = max(τ, lo), then min(τ, hi) only when hi > 0.
func clampTau(tau, lo, hi float64) float64 {
	tau = max(tau, lo)
	if hi > 0 {
		tau = min(tau, hi)
	}
	return tau
}

// BetaController is the multiplicative KL controller of β
// (spec §2.2 maybe_update_beta; config kl_target, kl_horizon, kl_ctl_step_size).
// It is active only when all three fields are > 0.
type BetaController struct {
	// Target is the KL the controller aims at (kl_target).
	Target float64
	// Horizon is the number of steps over which β adapts (kl_horizon).
	Horizon float64
	// StepSize clips the relative KL error (kl_ctl_step_size).
	StepSize float64
}

// Enabled reports whether the controller is active.
func (c BetaController) Enabled() bool {
	return c.Target > 0 && c.Horizon > 0 && c.StepSize > 0
}

// Update returns β after one step with measured KL kl (spec §2.2):
//
//	e = clip(KL / max(target, 1e-8) - 1, -step, step);  β ← max(0, β · (1 + e/horizon))
//
// β is unchanged when disabled, when KL is not finite, or when |e| < 1e-8; a
// non-positive factor becomes 1e-6. β = 0 stays 0.
func (c BetaController) Update(beta, kl float64) float64 {
	if !c.Enabled() || !isFinite(kl) || !isFinite(beta) {
		return beta
	}
	e := kl/max(c.Target, 1e-8) - 1
	if math.Abs(e) < 1e-8 {
		return beta
	}
	e = min(max(e, -c.StepSize), c.StepSize)
	f := 1 + e/c.Horizon
	if f <= 0 {
		f = 1e-6
	}
	return max(0, beta*f)
}

// Meta-controller methods after alias mapping (spec §2.3).
const (
	// MetaMethodAnalytic uses closed-form gradients (AnalyticObjective).
	MetaMethodAnalytic = "analytic"
	// MetaMethodTruncated uses truncated backprop through a callback.
	MetaMethodTruncated = "truncated"
)

// MetaMethod maps a configured method name to MetaMethodAnalytic or
// MetaMethodTruncated (spec §2.3): first_order, truncated,
// truncated_backprop and backprop are truncated; analytic, analytic_grad,
// potential and every unknown name are analytic.
func MetaMethod(name string) string {
	switch name {
	case "first_order", "truncated", "truncated_backprop", "backprop":
		return MetaMethodTruncated
	}
	return MetaMethodAnalytic
}

// MetaController adapts τ and β by gradient steps on a controller objective
// (spec §2.3; config controller_meta_*).
type MetaController struct {
	// Enabled turns the meta-controller on; the plain tau/beta controllers
	// are then bypassed.
	Enabled bool
	// Method is the objective name, mapped by MetaMethod (default analytic).
	Method string
	// LR is the shared learning rate (controller_meta_lr).
	LR float64
	// TauLR overrides LR for τ when > 0.
	TauLR float64
	// BetaLR overrides LR for β when > 0.
	BetaLR float64
	// BetaGradClip clips the β gradient to ±BetaGradClip when > 0.
	BetaGradClip float64
	// UpdateInterval runs the controller when step % interval == 0 (values
	// < 1 count as 1).
	UpdateInterval int64
	// Objective is recorded in the state file (the original: "potential").
	Objective string
	// AnalyticSteps is recorded in the state file (the original: 1).
	AnalyticSteps int
	// Optimizer is recorded in the state file (the original: "sgd").
	Optimizer string
	// TruncationSteps is passed to the truncated objective's callback (>= 1).
	TruncationSteps int
	// UseHessian is recorded in the state file (the original: false).
	UseHessian bool
}

// DefaultMetaController returns the original's meta-controller defaults
// (disabled).
func DefaultMetaController() MetaController {
	return MetaController{Method: MetaMethodAnalytic, UpdateInterval: 1, Objective: "potential",
		AnalyticSteps: 1, Optimizer: "sgd", TruncationSteps: 1}
}

// ShouldRun reports whether the meta-controller runs at this step
// (the TRL rule step % interval == 0, spec §8 quirk 8).
func (m MetaController) ShouldRun(step int64) bool {
	return m.Enabled && step%max(m.UpdateInterval, 1) == 0
}

// ControllerGradients are the gradients of the controller objective with
// respect to τ and β.
type ControllerGradients struct {
	// Tau is ∂J/∂τ; valid when HasTau.
	Tau float64
	// Beta is ∂J/∂β; valid when HasBeta.
	Beta float64
	// HasTau and HasBeta say which gradients are known.
	HasTau, HasBeta bool
}

// MetaSignals are the measurements a controller objective reads. NaN marks
// an unknown value.
type MetaSignals struct {
	// Entropy is the measured entropy (weight entropy, or token-mean policy
	// entropy when available).
	Entropy float64
	// TargetEntropy is H* at this step.
	TargetEntropy float64
	// KL is the measured KL to the reference.
	KL float64
	// KLTarget is the KL target; <= 0 means no β gradient.
	KLTarget float64
}

// ControllerObjective produces the meta-controller's gradients; ok is false
// when it has none.
type ControllerObjective interface {
	Gradients(sig MetaSignals) (g ControllerGradients, ok bool)
}

// AnalyticObjective is the closed-form objective (spec §2.3):
//
//	g_τ = H - H*  (if both known);   g_β = KL - KL*  (if KL known and KL* > 0)
type AnalyticObjective struct{}

// Gradients implements ControllerObjective.
func (AnalyticObjective) Gradients(sig MetaSignals) (ControllerGradients, bool) {
	var g ControllerGradients
	if isFinite(sig.Entropy) && isFinite(sig.TargetEntropy) {
		g.Tau, g.HasTau = sig.Entropy-sig.TargetEntropy, true
	}
	if isFinite(sig.KL) && sig.KLTarget > 0 {
		g.Beta, g.HasBeta = sig.KL-sig.KLTarget, true
	}
	return g, g.HasTau || g.HasBeta
}

// BackpropFunc runs `steps` steps of truncated backpropagation through the
// controller parameters and returns their gradients.
type BackpropFunc func(steps int) (ControllerGradients, error)

// TruncatedObjective asks Backprop for the gradients and falls back to
// AnalyticObjective when the callback is nil, fails or returns no gradient
// (spec §2.3 TruncatedBackpropControllerObjective).
type TruncatedObjective struct {
	// Steps is the truncation length passed to Backprop.
	Steps int
	// Backprop computes the gradients; nil means analytic.
	Backprop BackpropFunc
}

// Gradients implements ControllerObjective.
func (t TruncatedObjective) Gradients(sig MetaSignals) (ControllerGradients, bool) {
	if t.Backprop != nil {
		g, err := t.Backprop(max(t.Steps, 1))
		if err == nil && (g.HasTau || g.HasBeta) {
			return g, true
		}
	}
	return AnalyticObjective{}.Gradients(sig)
}

// BuildObjective returns the configured objective: TruncatedObjective with
// TruncationSteps and the callback for the truncated family, else
// AnalyticObjective (spec §2.3 build_controller_objective).
func (m MetaController) BuildObjective(backprop BackpropFunc) ControllerObjective {
	if MetaMethod(m.Method) == MetaMethodTruncated {
		return TruncatedObjective{Steps: max(m.TruncationSteps, 1), Backprop: backprop}
	}
	return AnalyticObjective{}
}

// Apply returns the state after one meta-controller step (spec §2.3
// apply_meta_controller_update):
//
//	τ ← clamp(τ - lr_τ·g_τ, tauMin, tauMax)       (tauMax <= 0: unbounded)
//	β ← max(β + lr_β·clip(g_β, ±clip), 0)         (KL above target raises β)
//
// with lr_x = (x's own LR if > 0, else LR)·lrScale. Unknown or non-finite
// gradients leave their parameter unchanged. The gradients are recorded in
// s.Meta (last_tau_grad, last_beta_grad) and tau_log follows τ.
func (m MetaController) Apply(s ControllerState, g ControllerGradients, lrScale, tauMin, tauMax float64) ControllerState {
	lr := func(own float64) float64 {
		if own > 0 {
			return own * lrScale
		}
		return m.LR * lrScale
	}
	if g.HasTau && isFinite(g.Tau) {
		if tau := clampTau(s.Tau-lr(m.TauLR)*g.Tau, tauMin, tauMax); isFinite(tau) {
			s.Tau = tau
			s.TauLog = math.Log(max(tau, tauLogFloor))
		}
		s.Meta.Controller.LastTauGrad = g.Tau
	}
	if g.HasBeta && isFinite(g.Beta) {
		gb := g.Beta
		if m.BetaGradClip > 0 {
			gb = min(max(gb, -m.BetaGradClip), m.BetaGradClip)
		}
		if beta := max(s.Beta+lr(m.BetaLR)*gb, 0); isFinite(beta) {
			s.Beta = beta
		}
		s.Meta.Controller.LastBetaGrad = g.Beta
	}
	return s
}
