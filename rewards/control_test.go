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
	// back to analytic without a backprop callback); an unknown one makes no
	// update, as in the original (config refuses it before a run).
	for _, name := range []string{"analytic", "analytic_grad", "potential", "first_order", "truncated", "truncated_backprop", "backprop", ""} {
		c.Meta.Method = name
		if got, up := c.Update(s0, in); !up.MetaRan || !near(got.Tau, 0.5+0.1*0.1, 1e-15) {
			t.Errorf("method %q: ran %v tau %v", name, up.MetaRan, got.Tau)
		}
	}
	c.Meta.Method = "bogus"
	if got, up := c.Update(s0, in); up.MetaRan || got != s0 {
		t.Errorf("unknown method updated: ran %v state %+v", up.MetaRan, got)
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
