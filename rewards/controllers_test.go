package rewards

import (
	"errors"
	"math"
	"testing"
)

func TestBetaController(t *testing.T) {
	tests := []struct {
		name     string
		c        BetaController
		beta, kl float64
		want     float64
	}{
		// test_run_training_weighting.py (spec §2.2): beta 3, KL .14, target .07,
		// horizon 50000, step .15 -> 3·(1 + .15/50000).
		{name: "spec formula", c: BetaController{Target: 0.07, Horizon: 50000, StepSize: 0.15}, beta: 3, kl: 0.14, want: 3 * (1 + 0.15/50000)},
		{name: "KL below target", c: BetaController{Target: 0.1, Horizon: 10, StepSize: 1}, beta: 1, kl: 0.05, want: 1 * (1 - 0.5/10)},
		{name: "disabled", c: BetaController{Target: 0.07}, beta: 3, kl: 1, want: 3},
		{name: "beta 0 stays 0", c: BetaController{Target: 0.07, Horizon: 1, StepSize: 1}, beta: 0, kl: 1, want: 0},
		{name: "NaN KL", c: BetaController{Target: 0.07, Horizon: 1, StepSize: 1}, beta: 2, kl: math.NaN(), want: 2},
		{name: "on target", c: BetaController{Target: 0.07, Horizon: 1, StepSize: 1}, beta: 2, kl: 0.07, want: 2},
		{name: "factor floored at 1e-6", c: BetaController{Target: 1, Horizon: 0.5, StepSize: 1}, beta: 2, kl: 0, want: 2e-6},
	}
	for _, tc := range tests {
		if got := tc.c.Update(tc.beta, tc.kl); !near(got, tc.want, 1e-15) {
			t.Errorf("%s: beta = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTauControllerMovesTowardTarget(t *testing.T) {
	// spec §2.1: entropy below target -> tau grows; above -> tau shrinks.
	c := TauController{Enabled: true, Target: 1.0, LR: 0.5}
	for _, tc := range []struct {
		name string
		h    float64
		up   bool
	}{{"entropy below target", 0.2, true}, {"entropy above target", 1.8, false}} {
		s := NewControllerState(0.5, 0, DefaultMetaController())
		s2, rep := c.Update(s, tc.h, 1, 1)
		if !rep.Updated || (s2.Tau > 0.5) != tc.up {
			t.Errorf("%s: tau 0.5 -> %v (updated %v)", tc.name, s2.Tau, rep.Updated)
		}
		// first call: EMA initialised to H, then ema = H; log tau += lr·(H* - H).
		want := math.Exp(math.Log(0.5) + 0.5*(1.0-tc.h))
		if !near(s2.Tau, want, 1e-12) || !near(s2.TauLog, math.Log(want), 1e-12) || !near(s2.TauEntropyEMA, tc.h, 1e-15) {
			t.Errorf("%s: tau %v tau_log %v ema %v, want %v, ln, %v", tc.name, s2.Tau, s2.TauLog, s2.TauEntropyEMA, want, tc.h)
		}
		if s.Tau != 0.5 {
			t.Errorf("%s: input state modified", tc.name)
		}
	}
	// second call uses EMA 0.9.
	s := NewControllerState(0.5, 0, DefaultMetaController())
	s, _ = c.Update(s, 0.2, 1, 1)
	s, _ = c.Update(s, 1.2, 2, 1)
	if want := 0.9*0.2 + 0.1*1.2; !near(s.TauEntropyEMA, want, 1e-15) {
		t.Errorf("ema = %v, want %v", s.TauEntropyEMA, want)
	}
}

func TestTauControllerBoundsAndWarmup(t *testing.T) {
	s0 := NewControllerState(1, 0, DefaultMetaController())
	// spec §6 "tau_max<=0 unbounded": tau may grow past any cap.
	c := TauController{Enabled: true, Target: 10, LR: 1}
	s := s0
	for step := int64(1); step <= 5; step++ {
		s, _ = c.Update(s, 0, step, 1)
	}
	if s.Tau < 100 {
		t.Errorf("unbounded tau = %v, want > 100", s.Tau)
	}
	c.Max = 2
	s, _ = c.Update(s0, 0, 1, 1)
	if s.Tau != 2 || !near(s.TauLog, math.Ln2, 1e-15) {
		t.Errorf("clamped tau = %v (log %v), want 2 (anti-windup log ln2)", s.Tau, s.TauLog)
	}
	c = TauController{Enabled: true, Target: 0, LR: 10, Min: 0.3}
	if s, _ = c.Update(s0, 5, 1, 1); s.Tau != 0.3 {
		t.Errorf("tau_min clamp = %v, want 0.3", s.Tau)
	}
	// warmup: no update while step <= warmup; -1 behaves as 0 (spec §8 quirk 5).
	c = TauController{Enabled: true, Target: 1, LR: 1, WarmupSteps: 3}
	if _, rep := c.Update(s0, 0, 3, 1); rep.Updated {
		t.Errorf("updated during warmup at step 3")
	}
	if _, rep := c.Update(s0, 0, 4, 1); !rep.Updated {
		t.Errorf("not updated after warmup at step 4")
	}
	c.WarmupSteps = -1
	if _, rep := c.Update(s0, 0, 0, 1); rep.Updated {
		t.Errorf("warmup -1: updated at step 0")
	}
	if _, rep := c.Update(s0, 0, 1, 1); !rep.Updated {
		t.Errorf("warmup -1: not updated at step 1")
	}
	// lr_scale 0 and NaN entropy leave tau unchanged.
	c.WarmupSteps = 0
	if s, _ := c.Update(s0, 0, 1, 0); s.Tau != 1 {
		t.Errorf("lr_scale 0: tau = %v", s.Tau)
	}
	if s, rep := c.Update(s0, math.NaN(), 1, 1); s.Tau != 1 || rep.Updated || !isFinite(s.TauEntropyEMA) {
		t.Errorf("NaN entropy: %+v %+v", s, rep)
	}
	// disabled controller never updates.
	if _, rep := (TauController{LR: 1}).Update(s0, 0, 5, 1); rep.Updated {
		t.Errorf("disabled controller updated")
	}
}

func TestTauTargetAnnealing(t *testing.T) {
	c := TauController{Enabled: true, Anneal: true, TargetStart: 2, TargetFinal: 1, Horizon: 10}
	for _, tc := range []struct {
		step int64
		want float64
	}{{-5, 2}, {0, 2}, {5, 1.5}, {10, 1}, {50, 1}} {
		if got := c.TargetAt(tc.step); !near(got, tc.want, 1e-15) {
			t.Errorf("TargetAt(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
	c.Horizon = 0
	if got := c.TargetAt(0); got != 1 {
		t.Errorf("horizon 0: target %v, want final 1", got)
	}
}

// TestAnalyticObjective is test_controller_objective.py: H .9, H* .4, KL .6,
// target .3 -> (0.5, 0.3).
func TestAnalyticObjective(t *testing.T) {
	g, ok := AnalyticObjective{}.Gradients(MetaSignals{Entropy: 0.9, TargetEntropy: 0.4, KL: 0.6, KLTarget: 0.3})
	if !ok || !g.HasTau || !g.HasBeta || !near(g.Tau, 0.5, 1e-15) || !near(g.Beta, 0.3, 1e-15) {
		t.Errorf("gradients = %+v, %v; want (0.5, 0.3)", g, ok)
	}
	g, ok = AnalyticObjective{}.Gradients(MetaSignals{Entropy: 0.9, TargetEntropy: math.NaN(), KL: 0.6, KLTarget: 0})
	if ok || g.HasTau || g.HasBeta {
		t.Errorf("no target: gradients = %+v, %v; want none", g, ok)
	}
}

// TestTruncatedObjective: the truncated objective calls back with steps=2,
// else falls back to analytic (test_controller_objective.py).
func TestTruncatedObjective(t *testing.T) {
	sig := MetaSignals{Entropy: 0.9, TargetEntropy: 0.4, KL: 0.6, KLTarget: 0.3}
	var gotSteps int
	m := DefaultMetaController()
	m.Method, m.TruncationSteps = "truncated_backprop", 2
	obj := m.BuildObjective(func(steps int) (ControllerGradients, error) {
		gotSteps = steps
		return ControllerGradients{Tau: 7, HasTau: true}, nil
	})
	g, ok := obj.Gradients(sig)
	if !ok || gotSteps != 2 || g.Tau != 7 || g.HasBeta {
		t.Errorf("callback: steps %d gradients %+v", gotSteps, g)
	}
	for name, fn := range map[string]BackpropFunc{
		"nil callback":   nil,
		"failing":        func(int) (ControllerGradients, error) { return ControllerGradients{}, errors.New("no graph") },
		"empty gradient": func(int) (ControllerGradients, error) { return ControllerGradients{}, nil },
	} {
		g, ok := m.BuildObjective(fn).Gradients(sig)
		if !ok || !near(g.Tau, 0.5, 1e-15) || !near(g.Beta, 0.3, 1e-15) {
			t.Errorf("%s: gradients %+v, want analytic fallback (0.5, 0.3)", name, g)
		}
	}
}

func TestMetaMethodMapping(t *testing.T) {
	// spec §6: first_order/truncated -> truncated, unknown -> analytic.
	for in, want := range map[string]string{
		"first_order": MetaMethodTruncated, "truncated": MetaMethodTruncated, "truncated_backprop": MetaMethodTruncated,
		"backprop": MetaMethodTruncated, "analytic": MetaMethodAnalytic, "analytic_grad": MetaMethodAnalytic,
		"potential": MetaMethodAnalytic, "bogus": MetaMethodAnalytic, "": MetaMethodAnalytic,
	} {
		if got := MetaMethod(in); got != want {
			t.Errorf("MetaMethod(%q) = %q, want %q", in, got, want)
		}
	}
	if _, ok := (MetaController{Method: "bogus"}).BuildObjective(nil).(AnalyticObjective); !ok {
		t.Errorf("unknown method did not build the analytic objective")
	}
}

// TestMetaApply is test_run_training_weighting.py's meta update with the
// first_order alias: tau .5, beta .2, lr .1, grads (1, 2) -> tau .4, beta .4.
func TestMetaApply(t *testing.T) {
	m := DefaultMetaController()
	m.Enabled, m.Method, m.LR = true, "first_order", 0.1
	s := NewControllerState(0.5, 0.2, m)
	got := m.Apply(s, ControllerGradients{Tau: 1, Beta: 2, HasTau: true, HasBeta: true}, 1, 0, 0)
	if !near(got.Tau, 0.4, 1e-15) || !near(got.Beta, 0.4, 1e-15) {
		t.Errorf("tau, beta = %v, %v; want 0.4, 0.4", got.Tau, got.Beta)
	}
	if got.Meta.Controller.LastTauGrad != 1 || got.Meta.Controller.LastBetaGrad != 2 || !near(got.TauLog, math.Log(0.4), 1e-15) {
		t.Errorf("recorded grads %v %v, tau_log %v", got.Meta.Controller.LastTauGrad, got.Meta.Controller.LastBetaGrad, got.TauLog)
	}
	// per-parameter LRs, beta clip, projections.
	m.TauLR, m.BetaLR, m.BetaGradClip = 1, 1, 0.05
	got = m.Apply(s, ControllerGradients{Tau: 10, Beta: -5, HasTau: true, HasBeta: true}, 1, 0.01, 0)
	if got.Tau != 0.01 || !near(got.Beta, 0.15, 1e-15) {
		t.Errorf("projected tau, clipped beta = %v, %v; want 0.01, 0.15", got.Tau, got.Beta)
	}
	got = m.Apply(s, ControllerGradients{Tau: -10, Beta: -50, HasTau: true, HasBeta: true}, 1, 0, 2)
	if got.Tau != 2 || !near(got.Beta, 0.15, 1e-15) {
		t.Errorf("tau_max projection = %v, beta %v", got.Tau, got.Beta)
	}
	m.BetaGradClip = 0
	if got = m.Apply(s, ControllerGradients{Beta: -50, HasBeta: true}, 1, 0, 0); got.Beta != 0 || got.Tau != 0.5 {
		t.Errorf("beta floor 0 / tau untouched: %v %v", got.Beta, got.Tau)
	}
	if got = m.Apply(s, ControllerGradients{Tau: math.NaN(), HasTau: true}, 1, 0, 0); got.Tau != 0.5 {
		t.Errorf("NaN gradient changed tau: %v", got.Tau)
	}
	// interval: step % n == 0 (TRL rule).
	m.UpdateInterval = 3
	if !m.ShouldRun(0) || m.ShouldRun(1) || !m.ShouldRun(3) {
		t.Errorf("ShouldRun with interval 3 wrong")
	}
	if (MetaController{}).ShouldRun(0) {
		t.Errorf("disabled meta-controller runs")
	}
}
