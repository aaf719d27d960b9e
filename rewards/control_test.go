package rewards

import (
	"math"
	"testing"
)

func TestControllersUpdate(t *testing.T) {
	s0 := NewControllerState(0.5, 0.2, DefaultMetaController())
	c := Controllers{
		Tau:  TauController{Enabled: true, Target: 1, LR: 0.5},
		Beta: BetaController{Target: 0.07, Horizon: 50000, StepSize: 0.15},
	}
	in := ControllerInputs{Step: 1, WeightEntropy: 0.2, PolicyEntropy: math.NaN(), KL: 0.14, LRScale: 1}
	s, up := c.Update(s0, in)
	// plain controllers: same as calling each (spec §2.1, §2.2).
	wantS, _ := c.Tau.Update(s0, 0.2, 1, 1)
	if s.Tau != wantS.Tau || !near(s.Beta, 0.2*(1+0.15/50000), 1e-15) || !up.Tau.Updated || up.MetaRan {
		t.Errorf("plain update: %+v %+v", s, up)
	}
	// meta-controller: plain controllers bypassed; analytic g_tau = H - H*, g_beta = KL - KL*.
	c.Meta = DefaultMetaController()
	c.Meta.Enabled, c.Meta.LR, c.Meta.UpdateInterval = true, 0.1, 2
	if s, up := c.Update(s0, in); s != s0 || up.MetaRan {
		t.Errorf("meta off-interval step changed the state: %+v", s)
	}
	in.Step, in.PolicyEntropy = 2, 0.9
	s, up = c.Update(s0, in)
	if !up.MetaRan || !near(up.Grads.Tau, -0.1, 1e-15) || !near(up.Grads.Beta, 0.07, 1e-15) {
		t.Errorf("meta grads %+v", up.Grads)
	}
	if !near(s.Tau, 0.5+0.1*0.1, 1e-15) || !near(s.Beta, 0.2+0.1*0.07, 1e-15) {
		t.Errorf("meta update: tau %v beta %v", s.Tau, s.Beta)
	}
	// the meta-controller replaces the plain ones, so it reads their targets
	// even when they are off (config refuses both on at once).
	c.Tau.Enabled, c.Beta.Horizon, c.Beta.StepSize = false, 0, 0
	if _, up = c.Update(s0, in); !near(up.Grads.Tau, -0.1, 1e-15) || !near(up.Grads.Beta, 0.07, 1e-15) {
		t.Errorf("meta grads with the plain controllers off %+v", up.Grads)
	}
	// every method name of the original updates (the truncated family falls
	// back to analytic without a backprop callback), and so does an unknown
	// one: the original falls back to the analytic objective (spec §2.3
	// "unknown -> analytic"; config refuses it before a run).
	for _, name := range []string{"analytic", "analytic_grad", "potential", "first_order", "truncated", "truncated_backprop", "backprop", "", "bogus"} {
		c.Meta.Method = name
		if got, up := c.Update(s0, in); !up.MetaRan || !near(got.Tau, 0.5+0.1*0.1, 1e-15) || !near(got.Beta, 0.2+0.1*0.07, 1e-15) {
			t.Errorf("method %q: ran %v tau %v beta %v", name, up.MetaRan, got.Tau, got.Beta)
		}
	}
	c.Meta.Method = MetaMethodAnalytic
	// no target configured: no tau gradient.
	c.Tau.Target = 0
	if _, up = c.Update(s0, in); up.Grads.HasTau {
		t.Errorf("meta gave a tau gradient without a target: %+v", up.Grads)
	}
}

// TestControllersMetaEntropySignal: the meta-controller's entropy is the
// token-mean policy entropy under the MaxEnt objectives and the weight
// entropy under the GRPO objectives, whatever the batch carries (the
// original's ControllerMetaContext.entropy_value, checked by running it).
func TestControllersMetaEntropySignal(t *testing.T) {
	meta := DefaultMetaController()
	meta.Enabled, meta.LR = true, 0.1
	in := ControllerInputs{Step: 1, WeightEntropy: 1.2, PolicyEntropy: 0.3, KL: math.NaN(), LRScale: 1}
	for _, tc := range []struct {
		obj    Objective
		policy float64
		want   float64 // g_tau = H - H*
	}{
		{ObjectiveMaxEntListwise, 0.3, 0.3 - 1},
		{ObjectiveMaxEntEntropy, 0.3, 0.3 - 1},
		{"", 0.3, 0.3 - 1},
		{ObjectiveMaxEntListwise, math.NaN(), 1.2 - 1}, // no policy entropy: weight entropy
		{ObjectiveGRPO, 0.3, 1.2 - 1},
		{ObjectiveGRPOEntropyBonus, 0.3, 1.2 - 1},
	} {
		c := Controllers{Tau: TauController{Target: 1}, Meta: meta, Objective: tc.obj}
		in.PolicyEntropy = tc.policy
		_, up := c.Update(NewControllerState(0.5, 0, meta), in)
		if !up.MetaRan || !near(up.Grads.Tau, tc.want, 1e-15) {
			t.Errorf("%q policy entropy %v: g_tau %v, want %v", tc.obj, tc.policy, up.Grads.Tau, tc.want)
		}
	}
}

// TestControllersMetaGRPOIgnoresPolicyEntropy: under the grpo objective the
// meta-controller's tau gradient never reads the policy entropy (spec §2.3:
// entropy_value returns it only in MaxEnt mode). A GRPO batch has no
// listwise weights, so its weight entropy is NaN and there is no tau
// gradient at all; the beta gradient still steps beta, and tau stays.
func TestControllersMetaGRPOIgnoresPolicyEntropy(t *testing.T) {
	meta := DefaultMetaController()
	meta.Enabled, meta.LR = true, 0.1
	in := ControllerInputs{Step: 1, WeightEntropy: math.NaN(), PolicyEntropy: 0.3, KL: 0.5, LRScale: 1}
	for _, obj := range []Objective{ObjectiveGRPO, ObjectiveGRPOEntropyBonus} {
		c := Controllers{Tau: TauController{Target: 1}, Beta: BetaController{Target: 0.2}, Meta: meta, Objective: obj}
		s0 := NewControllerState(0.5, 0.1, meta)
		s, up := c.Update(s0, in)
		if up.Grads.HasTau || !up.Grads.HasBeta || !near(up.Grads.Beta, 0.3, 1e-15) || s.Tau != 0.5 || !near(s.Beta, 0.1+0.1*0.3, 1e-15) {
			t.Errorf("%s: grads %+v, tau %v beta %v; want no tau gradient, g_beta .3, tau .5, beta .13", obj, up.Grads, s.Tau, s.Beta)
		}
	}
	// the same inputs under a MaxEnt objective: g_tau = H_policy - H* = -.7.
	c := Controllers{Tau: TauController{Target: 1}, Meta: meta, Objective: ObjectiveMaxEntEntropy}
	if _, up := c.Update(NewControllerState(0.5, 0.1, meta), in); !up.Grads.HasTau || !near(up.Grads.Tau, -0.7, 1e-15) {
		t.Errorf("maxent_entropy: grads %+v, want g_tau -.7 from the policy entropy", up.Grads)
	}
}
