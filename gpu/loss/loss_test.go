package loss

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

const tol = 1e-12

func near(a, b, eps float64) bool {
	return math.Abs(a-b) <= eps*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func ones(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func withType(typ string) Config {
	c := Default()
	c.Type = typ
	return c
}

// TestAggregation uses the spec §1.9a test vector: masks [1,0,0,0] and
// [1,1,1,1], A = 1, lp = old (ratio 1), so every token's loss is −1.
func TestAggregation(t *testing.T) {
	b := Batch{N: 2, T: 4, Mask: []float64{1, 0, 0, 0, 1, 1, 1, 1}, Advantages: []float64{1, 1}}
	lp := []float64{-1, 0, 0, 0, -2, -0.5, -1, -3}
	active := withType(TypeDrGRPO)
	active.DrGRPODenominator = DenomActiveTokens
	fixed := withType(TypeDrGRPO)
	fixedLen := fixed
	fixedLen.MaxCompletionLen = 10
	cases := []struct {
		name string
		cfg  Config
		want float64
	}{
		{"dr_grpo active_tokens (spec: -1.0, denominator 5)", active, -1.0},
		{"dr_grpo fixed_max, max len = T = 4: -5/(2*4)", fixed, -0.625},
		{"dr_grpo fixed_max, max len 10: -5/(2*10)", fixedLen, -0.25},
		{"grpo: mean of per-sequence means", withType(TypeGRPO), -1.0},
		{"bnpo: token mean", withType(TypeBNPO), -1.0},
	}
	for _, c := range cases {
		res, err := GRPO(c.cfg, b, lp)
		if err != nil {
			t.Fatal(err)
		}
		if !near(res.Loss, c.want, tol) {
			t.Errorf("%s: loss = %v, want %v", c.name, res.Loss, c.want)
		}
		if res.Stats.Tokens != 5 || res.Stats.RatioMean != 1 {
			t.Errorf("%s: stats = %+v", c.name, res.Stats)
		}
	}
}

// TestGRPOGradientAtRatioOne: with lp == old every ratio is 1, inside the
// clip range, so ∂L/∂lp_t = −A_i/(N·n_i) under grpo aggregation.
func TestGRPOGradientAtRatioOne(t *testing.T) {
	b := Batch{N: 2, T: 3, Mask: []float64{1, 1, 0, 1, 1, 1}, Advantages: []float64{0.5, -2}}
	lp := []float64{-1, -2, 0, -0.3, -0.1, -4}
	b.OldLogp = lp
	res, err := GRPO(withType(TypeGRPO), b, lp)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{-0.5 / 4, -0.5 / 4, 0, 2.0 / 6, 2.0 / 6, 2.0 / 6}
	for k := range want {
		if !near(res.DLogp[k], want[k], tol) {
			t.Errorf("DLogp[%d] = %v, want %v", k, res.DLogp[k], want[k])
		}
	}
	if res.DEntropy != nil {
		t.Error("GRPO returned DEntropy")
	}
}

// TestTokenValues checks single-token values computed by hand.
func TestTokenValues(t *testing.T) {
	ln := math.Log
	cases := []struct {
		name      string
		cfg       func(*Config)
		lp, old   float64
		beh, ref  float64
		adv       float64
		wantLoss  float64
		wantGrad  float64
		low, high float64
	}{
		// r = 1.5 > 1.2, A > 0: min picks the clipped 1.2·A, gradient 0.
		{"clipped high", nil, ln(1.5), 0, math.NaN(), math.NaN(), 1, -1.2, 0, 0, 1},
		// r = 1.5, A < 0: min(−1.5, −1.2) = −1.5 unclipped: loss 1.5, grad −A·r = 1.5.
		{"unclipped, A<0", nil, ln(1.5), 0, math.NaN(), math.NaN(), -1, 1.5, 1.5, 0, 0},
		// r = 0.5 < 0.8, A < 0: clipped at 0.8 → loss 0.8, grad 0.
		{"clipped low", nil, ln(0.5), 0, math.NaN(), math.NaN(), -1, 0.8, 0, 1, 0},
		// clip-higher ε_high = 0.6: r = 1.5 inside → loss −1.5, grad −1.5.
		{"epsilon_high", func(c *Config) { c.EpsilonHigh = 0.6 }, ln(1.5), 0, math.NaN(), math.NaN(), 1, -1.5, -1.5, 0, 0},
		// log-ratio 7 clamped at 5: r = e^5, A < 0 → loss e^5, grad 0 (clamp).
		{"log-ratio clamp", nil, 7, 0, math.NaN(), math.NaN(), -1, math.Exp(5), 0, 0, 0},
		// delta 1.3 caps r = 1.5 at 1.3 for A < 0: loss 1.3, grad 0.
		{"delta", func(c *Config) { c.Delta = 1.3 }, ln(1.5), 0, math.NaN(), math.NaN(), -1, 1.3, 0, 0, 0},
		// IS weight min(exp(ln 3), 2) = 2 doubles the unclipped term (r = 1).
		{"IS truncation", func(c *Config) { c.ISTruncation = 2 }, -1, -1, -1 - ln(3), math.NaN(), 1, -2, -2, 0, 0},
		// IS weight exp(−ln 2) = 0.5 below C.
		{"IS weight", func(c *Config) { c.ISTruncation = 2 }, -1, -1, -1 + ln(2), math.NaN(), 1, -0.5, -0.5, 0, 0},
		// KL: ref − lp = 1: k3 = e − 2, ∂k3/∂lp = −(e − 1); β = 0.1, A = 0.
		{"k3", func(c *Config) { c.Beta = 0.1 }, -2, -2, math.NaN(), -1, 0, 0.1 * (math.E - 2), -0.1 * (math.E - 1), 0, 0},
		// CISPO: w = clamp(1.5, 0.8, 1.2) = 1.2 detached; L = −1.2·A·lp.
		{"cispo", func(c *Config) { c.Policy = PolicyCISPO }, ln(1.5), 0, math.NaN(), math.NaN(), 1, -1.2 * ln(1.5), -1.2, 0, 1},
	}
	for _, c := range cases {
		cfg := Default()
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		b := Batch{N: 1, T: 1, Mask: []float64{1}, OldLogp: []float64{c.old}, Advantages: []float64{c.adv}}
		if !math.IsNaN(c.beh) {
			b.BehaviourLogp = []float64{c.beh}
		}
		if !math.IsNaN(c.ref) {
			b.RefLogp = []float64{c.ref}
		}
		res, err := Policy(cfg, b, []float64{c.lp})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !near(res.Loss, c.wantLoss, 1e-12) || !near(res.DLogp[0], c.wantGrad, 1e-12) {
			t.Errorf("%s: loss, grad = %v, %v; want %v, %v", c.name, res.Loss, res.DLogp[0], c.wantLoss, c.wantGrad)
		}
		if res.Stats.ClipLow != c.low || res.Stats.ClipHigh != c.high {
			t.Errorf("%s: clip low/high = %v/%v, want %v/%v", c.name, res.Stats.ClipLow, res.Stats.ClipHigh, c.low, c.high)
		}
	}
}

func TestGSPOValues(t *testing.T) {
	// One sequence, lp − old = [0.1, 0.3] (+ a masked token): mean 0.2,
	// s = e^0.2 ≈ 1.2214 > 1.2.
	b := Batch{N: 1, T: 3, Mask: []float64{1, 1, 0}, OldLogp: []float64{-1.1, -2.3, 0}}
	lp := []float64{-1, -2, math.Inf(-1)}
	cfg := Default()
	cfg.Policy = PolicyGSPO
	s := math.Exp(0.2)
	cases := []struct {
		adv, wantLoss, wantGrad float64
	}{
		{1, -1.2, 0},         // clipped branch: gradient 0
		{-1, s, s / 2},       // unclipped: ∂(−s·A)/∂lp_t = −A·s/n
		{0.5, -0.6, 0},       // clipped
		{-0.5, s / 2, s / 4}, //
	}
	for _, c := range cases {
		b.Advantages = []float64{c.adv}
		res, err := GSPO(cfg, b, lp)
		if err != nil {
			t.Fatal(err)
		}
		if !near(res.Loss, c.wantLoss, 1e-12) || !near(res.DLogp[0], c.wantGrad, 1e-12) ||
			!near(res.DLogp[1], c.wantGrad, 1e-12) || res.DLogp[2] != 0 {
			t.Errorf("A=%v: loss %v, grad %v; want %v, %v", c.adv, res.Loss, res.DLogp, c.wantLoss, c.wantGrad)
		}
		if !near(res.Stats.RatioMean, s, 1e-12) {
			t.Errorf("ratio mean = %v, want %v", res.Stats.RatioMean, s)
		}
	}
}

// TestListwiseSpecVector is spec §1.9b's test: K = 2, token probs .75/.25
// over 2 tokens, q = [.8, .2], tau 1, beta 0 → list probs [.9, .1] and
// loss −(.8 ln .9 + .2 ln .1). The weights are q here.
func TestListwiseSpecVector(t *testing.T) {
	l75, l25 := math.Log(0.75), math.Log(0.25)
	b := Batch{N: 2, T: 2, Mask: ones(4), GroupSize: 2, Weights: []float64{0.8, 0.2}}
	res, err := Listwise(Default(), b, []float64{l75, l75, l25, l25})
	if err != nil {
		t.Fatal(err)
	}
	want := -(0.8*math.Log(0.9) + 0.2*math.Log(0.1))
	if !near(res.Loss, want, 1e-12) {
		t.Errorf("loss = %v, want %v", res.Loss, want)
	}
	// ∂L/∂S = p − w = [.9−.8, .1−.2]; each token of a sequence gets it.
	for k, w := range []float64{0.1, 0.1, -0.1, -0.1} {
		if !near(res.DLogp[k], w, 1e-12) {
			t.Errorf("DLogp[%d] = %v, want %v", k, res.DLogp[k], w)
		}
	}
	if res.Stats.ActiveGroups != 1 {
		t.Errorf("active groups = %d", res.Stats.ActiveGroups)
	}
}

func TestListwiseNeutralGroups(t *testing.T) {
	b := Batch{N: 4, T: 1, Mask: ones(4), GroupSize: 2, Weights: []float64{0.5, 0.5, 0.9, 0.1}}
	lp := []float64{-1, -2, -1, -3}
	all, err := Listwise(Default(), b, lp)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.ListwiseSkipZeroVariance = true
	skip, err := Listwise(cfg, b, lp)
	if err != nil {
		t.Fatal(err)
	}
	if all.Stats.ActiveGroups != 2 || skip.Stats.ActiveGroups != 1 {
		t.Errorf("active groups = %d / %d, want 2 / 1", all.Stats.ActiveGroups, skip.Stats.ActiveGroups)
	}
	if skip.DLogp[0] != 0 || skip.DLogp[1] != 0 {
		t.Errorf("neutral group has gradient %v", skip.DLogp[:2])
	}
	// Second group alone: −(.9 log σ(2) + .1 log σ(−2)) with S = [−1, −3].
	want := -(0.9*math.Log(1/(1+math.Exp(-2))) + 0.1*math.Log(1/(1+math.Exp(2))))
	if !near(skip.Loss, want, 1e-12) {
		t.Errorf("skip loss = %v, want %v", skip.Loss, want)
	}
	b.Weights = []float64{0.5, 0.5, 0.5, 0.5}
	none, err := Listwise(cfg, b, lp)
	if err != nil || none.Loss != 0 || none.Stats.ActiveGroups != 0 {
		t.Errorf("all neutral: %+v, %v", none, err)
	}
}

// TestEntropySpecVector is spec §1.9a's test: a uniform 3-way policy,
// alpha 0.2, dr_grpo, A = 0 → loss −0.2 (H/ln V = 1).
func TestEntropySpecVector(t *testing.T) {
	for _, typ := range []string{TypeDrGRPO, TypeGRPO, TypeBNPO} {
		b := Batch{N: 2, T: 3, Mask: []float64{1, 1, 1, 1, 0, 0}, Advantages: []float64{0, 0}}
		lp, h := make([]float64, 6), make([]float64, 6)
		for k := range lp {
			lp[k], h[k] = -math.Log(3), math.Log(3)
		}
		res, err := MaxEntEntropy(withType(typ), b, lp, h, 0.2, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !near(res.Loss, -0.2, 1e-12) || !near(res.Stats.EntropyBasis, 1, 1e-12) {
			t.Errorf("%s: loss = %v, basis %v; want -0.2, 1", typ, res.Loss, res.Stats.EntropyBasis)
		}
		if res.DEntropy[4] != 0 || res.DEntropy[0] >= 0 {
			t.Errorf("%s: DEntropy = %v", typ, res.DEntropy)
		}
	}
}

func TestSupervised(t *testing.T) {
	b := Batch{N: 2, T: 2, Mask: []float64{1, 1, 1, 0}}
	res, err := Supervised(b, []float64{-1, -2, -3, math.Inf(-1)})
	if err != nil {
		t.Fatal(err)
	}
	if !near(res.Loss, 2, tol) || res.DLogp[3] != 0 || !near(res.DLogp[0], -1.0/3, tol) {
		t.Errorf("supervised = %v %v, want 2, -1/3", res.Loss, res.DLogp)
	}
}

func TestResolveAlpha(t *testing.T) {
	def := DefaultAlphaControl() // thr 0.04, gain 1, [0.5, 2]
	raise, lower, block := def, def, def
	raise.RaiseOnLowKL, lower.LowerOnHighKL, block.DisableOutsideTrustZone = true, true, true
	both := raise
	both.LowerOnHighKL = true
	cases := []struct {
		name    string
		c       AlphaControl
		kl      float64
		want    float64 // multiplier
		dir     int
		blocked bool
	}{
		{"off", def, 0.5, 1, 0, false},
		{"raise at KL 0.02: 1 + (0.04−0.02)/0.04", raise, 0.02, 1.5, 1, false},
		{"raise at KL 0: 2, at the max", raise, 0, 2, 1, false},
		{"raise ignores high KL", raise, 0.08, 1, 0, false},
		{"lower at KL 0.06: 1/(1 + 0.5)", lower, 0.06, 1 / 1.5, -1, false},
		{"lower at KL 0.2: 1/5 clamped to min 0.5", lower, 0.2, 0.5, -1, false},
		{"lower at NaN: min", lower, math.NaN(), 0.5, -1, false},
		{"both at low KL", both, 0.03, 1.25, 1, false},
		{"block above threshold", block, 0.05, 0, -1, true},
		{"block at Inf", block, math.Inf(1), 0, -1, true},
		{"block inside zone", block, 0.01, 1, 0, false},
	}
	for _, c := range cases {
		got := ResolveAlpha(c.c, 0.1, c.kl)
		if !near(got.Multiplier, c.want, 1e-12) || !near(got.Effective, 0.1*c.want, 1e-12) ||
			got.Direction != c.dir || got.Blocked != c.blocked {
			t.Errorf("%s: %+v, want multiplier %v dir %d blocked %v", c.name, got, c.want, c.dir, c.blocked)
		}
	}
	// alpha <= 0: the control is off whatever the KL (the original: multiplier
	// 1, direction 0, not blocked; the effective alpha is alpha).
	all := both
	all.DisableOutsideTrustZone = true
	for _, kl := range []float64{0, 0.02, 0.5, math.NaN()} {
		if got := ResolveAlpha(all, 0, kl); got != (Alpha{Effective: 0, Multiplier: 1}) {
			t.Errorf("alpha 0, KL %v: %+v, want multiplier 1, direction 0, not blocked", kl, got)
		}
	}
	if err := def.Validate(); err != nil {
		t.Error(err)
	}
	def.MinMultiplier = 0
	if err := def.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "alpha_kl_min_multiplier") {
		t.Errorf("Validate = %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		modify func(*Config)
		want   string
	}{
		{func(c *Config) { c.Type = "mean" }, `loss.type = mean`},
		{func(c *Config) { c.Policy = "ppo" }, `loss.policy = ppo`},
		{func(c *Config) { c.Epsilon = 0 }, `loss.epsilon = 0`},
		{func(c *Config) { c.EpsilonHigh = -1 }, `loss.epsilon_high = -1`},
		{func(c *Config) { c.Delta = 1.1 }, `loss.delta = 1.1: must exceed 1 + epsilon_high = 1.2`},
		{func(c *Config) { c.Beta = math.NaN() }, `loss.beta = NaN`},
		{func(c *Config) { c.DrGRPODenominator = "x" }, `loss.dr_grpo_denominator = x`},
		{func(c *Config) { c.MaxCompletionLen = -1 }, `loss.max_completion_len = -1`},
		{func(c *Config) { c.ISTruncation = -2 }, `loss.is_truncation = -2`},
		{func(c *Config) { c.ListwiseScale = 0 }, `loss.listwise_scale = 0`},
		{func(c *Config) { c.ListwiseClipRange = 2 }, `loss.listwise_clip_range = 2`},
	}
	for _, c := range cases {
		cfg := Default()
		c.modify(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate = %v, want ErrConfig containing %q", err, c.want)
		}
	}
}

func TestShapeErrors(t *testing.T) {
	good := Batch{N: 2, T: 2, Mask: ones(4), Advantages: []float64{1, 1}, GroupSize: 2, Weights: []float64{.5, .5}}
	lp := []float64{-1, -1, -1, -1}
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"lp", func() error { _, err := GRPO(Default(), good, lp[:3]); return err }, "len(lp)=3, want N·T=4"},
		{"mask", func() error { b := good; b.Mask = ones(3); _, err := GRPO(Default(), b, lp); return err }, "len(Mask)=3"},
		{"old", func() error { b := good; b.OldLogp = lp[:1]; _, err := CISPO(Default(), b, lp); return err }, "len(OldLogp)=1"},
		{"adv", func() error { b := good; b.Advantages = nil; _, err := GSPO(Default(), b, lp); return err }, "len(Advantages)=0"},
		{"beta needs ref", func() error { c := Default(); c.Beta = 0.1; _, err := GRPO(c, good, lp); return err }, "needs RefLogp"},
		{"group size", func() error { b := good; b.GroupSize = 3; _, err := Listwise(Default(), b, lp); return err }, "GroupSize=3"},
		{"weights", func() error { b := good; b.Weights = nil; _, err := Listwise(Default(), b, lp); return err }, "len(Weights)=0"},
		{"entropy", func() error { _, err := MaxEntEntropy(Default(), good, lp, lp[:2], 0.1, 98); return err }, "len(H)=2"},
		{"empty", func() error { _, err := Supervised(Batch{}, nil); return err }, "N=0, T=0"},
	}
	for _, c := range cases {
		err := c.run()
		if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want ErrShape containing %q", c.name, err, c.want)
		}
	}
}

func TestInputsUnmodified(t *testing.T) {
	b, lp, h := randomBatch(rand.New(rand.NewPCG(5, 5)), 4, 5, 2)
	snapshot := func() [][]float64 {
		var out [][]float64
		for _, s := range [][]float64{b.Mask, b.OldLogp, b.BehaviourLogp, b.RefLogp, b.Advantages, b.Weights, lp, h} {
			out = append(out, append([]float64(nil), s...))
		}
		return out
	}
	before := snapshot()
	cfg := Default()
	cfg.Beta, cfg.ISTruncation, cfg.ListwiseClipCoef = 0.1, 1.5, 1
	_, _ = MaxEntEntropy(cfg, b, lp, h, 0.1, 98)
	_, _ = Listwise(cfg, b, lp)
	cfg.Policy = PolicyGSPO
	_, _ = Policy(cfg, b, lp)
	after := snapshot()
	for i := range before {
		for j := range before[i] {
			if before[i][j] != after[i][j] {
				t.Fatalf("input %d modified at %d", i, j)
			}
		}
	}
}
