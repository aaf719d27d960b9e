package actors

import (
	"math"
	"testing"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// TestControllerStateTravelsWhole: a controller state survives its wire
// form unchanged, every field included, so the actor that owns it can send
// it whole and nothing is rebuilt on the other side.
func TestControllerStateTravelsWhole(t *testing.T) {
	meta := rewards.DefaultMetaController()
	meta.Enabled, meta.Method, meta.LR, meta.TauLR, meta.BetaLR = true, "analytic", 0.05, 0.01, 0.02
	meta.BetaGradClip, meta.UpdateInterval, meta.TruncationSteps, meta.UseHessian = 0.5, 3, 2, true
	fresh := rewards.NewControllerState(0.7, 0.03, meta)
	updated := fresh
	updated.TauLog, updated.TauEntropyEMA, updated.EntropyHistory = math.Log(0.7), 1.234, true
	updated.Meta.Controller.LastTauGrad, updated.Meta.Controller.LastBetaGrad = -0.25, 0.125
	for name, s := range map[string]rewards.ControllerState{"fresh": fresh, "after updates": updated} {
		m := controllerMessage(messages.NewMeta("run", 4, "b", 3), s)
		if got := controllerState(m); got != s {
			t.Errorf("%s: state %+v came back as %+v", name, s, got)
		}
	}
}

// TestControlGRPOTakesNoTauGradient: under the grpo objective the
// meta-controller's tau gradient ignores the policy entropy (spec §2.3);
// a GRPO batch has no listwise weights, so the step statistics carry no
// weight entropy (NaN, not 0) and the meta-controller steps beta alone.
// A listwise batch's weight entropy still reaches it.
func TestControlGRPOTakesNoTauGradient(t *testing.T) {
	meta := rewards.DefaultMetaController()
	meta.Enabled, meta.LR = true, 0.1
	report := &messages.StepReport{Meta: messages.NewMeta("run", 1, "b", 1), Kl: 0.5, Entropy: 0.3}
	for _, tc := range []struct {
		obj     rewards.Objective
		weights bool
		hasTau  bool
		gTau    float64
	}{
		{rewards.ObjectiveGRPO, false, false, 0},
		{rewards.ObjectiveGRPOEntropyBonus, false, false, 0},
		{rewards.ObjectiveMaxEntListwise, true, true, 0.3 - 1}, // MaxEnt: the policy entropy
	} {
		p := &rewards.Prepared{}
		p.Stats.HasWeights, p.Stats.Weight.Mean = tc.weights, 1.2
		c := rewards.Controllers{Tau: rewards.TauController{Target: 1}, Beta: rewards.BetaController{Target: 0.2}, Meta: meta, Objective: tc.obj}
		st := stepStats(report, p)
		if tc.weights == math.IsNaN(st.GetWeightEntropy()) {
			t.Errorf("%s: weight entropy %v in the step statistics", tc.obj, st.GetWeightEntropy())
		}
		s, up := control(c, rewards.NewControllerState(0.5, 0.1, meta), st)
		if up.GetHasTauGrad() != tc.hasTau || math.Abs(up.GetTauGrad()-tc.gTau) > 1e-15 || !up.GetHasBetaGrad() || math.Abs(up.GetBetaGrad()-0.3) > 1e-15 {
			t.Errorf("%s: update %+v, want tau gradient %t (%v) and beta gradient .3", tc.obj, up, tc.hasTau, tc.gTau)
		}
		if !tc.hasTau && s.Tau != 0.5 {
			t.Errorf("%s: tau moved to %v without a tau gradient", tc.obj, s.Tau)
		}
	}
}
