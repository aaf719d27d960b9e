package rewards

import (
	"errors"
	"math"
	"testing"
)

// policyBatch is a batch worked by hand: N=2, T=3, the third token of
// sequence 0 is padding (mask 0, NaN values that must not count), so 5
// tokens count, with d = new − old = [.5 0 | 0 −.5 −.5].
func policyBatch() TokenBatch {
	return TokenBatch{
		N: 2, T: 3,
		NewLogp:    []float64{-1, -2, math.NaN(), -0.5, -1, -1.5},
		OldLogp:    []float64{-1.5, -2, math.NaN(), -0.5, -0.5, -1.0},
		Entropy:    []float64{1, 2, math.NaN(), 0.5, 0.5, 0.5},
		Mask:       []float64{1, 1, 0, 1, 1, 1},
		Advantages: []float64{1, -1},
		TokenIDs:   []int{10, 11, 12, 13, 14, 15},
	}
}

// twinkleKeys are the keys of twinkle's GRPOMetric (seed page 003).
var twinkleKeys = []string{"train/policy_confidence", "train/mean_new_logp", "train/mean_old_logp", "train/logp_diff_mean",
	"train/approx_kl", "train/token_kl_max", "train/token_ratio_max", "train/entropy",
	"train/clip_ratio", "train/clip_ratio_low", "train/clip_ratio_high"}

// k3 is Schulman's K3 estimator term e^d − d − 1.
func k3(d float64) float64 { return math.Exp(d) - d - 1 }

// flattenPolicy returns the train/ keys policyBlock writes for st.
func flattenPolicy(st PolicyStats) map[string]float64 {
	return StepMetrics{Policy: &st}.Flatten()
}

// TestPolicyMetricsKeys pins every twinkle GRPOMetric key (spec §3.3, seed
// page 003) on policyBatch, the values worked from the formulas: n = 5,
// Σ new = −6, Σ old = −5.5, Σ d = −.5; ratios e^.5 (A > 0: above 1.2,
// clipped high) and e^−.5 twice (A < 0: below .8, clipped low).
func TestPolicyMetricsKeys(t *testing.T) {
	st, err := PolicyMetrics(policyBatch(), DefaultPolicyMetricsConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"train/policy_confidence": math.Exp(-1.2),
		"train/mean_new_logp":     -1.2,
		"train/mean_old_logp":     -1.1,
		"train/logp_diff_mean":    -0.1,
		"train/approx_kl":         (k3(0.5) + 2*k3(0) + 2*k3(-0.5)) / 5,
		"train/token_kl_max":      k3(0.5),
		"train/token_ratio_max":   math.Exp(0.5),
		"train/entropy":           0.9,
		"train/clip_ratio_low":    0.4,
		"train/clip_ratio_high":   0.2,
		"train/clip_ratio":        0.6,
	}
	if len(want) != len(twinkleKeys) {
		t.Fatalf("%d keys checked, twinkle has %d", len(want), len(twinkleKeys))
	}
	got := flattenPolicy(st)
	for k, v := range want {
		if g, ok := got[k]; !ok || !near(g, v, 1e-12) {
			t.Errorf("%s = %v (present %t), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want)+len(flattenPolicy(PolicyStats{})) {
		t.Errorf("policy keys %v, want exactly %d twinkle keys", got, len(want))
	}
	if st.Tokens != 5 {
		t.Errorf("tokens = %d, want 5 (the padding token does not count)", st.Tokens)
	}
}

// TestPolicyMetricsClipVariants: the clip rule of each policy loss, on
// policyBatch with the advantages given (ε = .2, ε_high = ε).
func TestPolicyMetricsClipVariants(t *testing.T) {
	tests := []struct {
		name      string
		variant   PolicyLossVariant
		adv       []float64
		low, high float64
	}{
		{"GRPO, signs agree", PolicyLossGRPO, []float64{1, -1}, 2. / 5, 1. / 5},
		// sign-gated: the high ratio has A < 0 and the low ones A > 0.
		{"GRPO, signs opposed", PolicyLossGRPO, []float64{-1, 1}, 0, 0},
		// CISPO counts every ratio outside [.8, 1.2], whatever the sign.
		{"CISPO, signs opposed", PolicyLossCISPO, []float64{-1, 1}, 2. / 5, 1. / 5},
		// GSPO: sequence ratios exp(mean d) = e^.25 = 1.28 and e^(−1/3) = .72,
		// over 2 sequences.
		{"GSPO, signs agree", PolicyLossGSPO, []float64{1, -1}, 1. / 2, 1. / 2},
		{"GSPO, signs opposed", PolicyLossGSPO, []float64{-1, 1}, 0, 0},
		{"GSPO, both negative", PolicyLossGSPO, []float64{-1, -1}, 1. / 2, 0},
	}
	for _, tc := range tests {
		b := policyBatch()
		b.Advantages = tc.adv
		cfg := DefaultPolicyMetricsConfig()
		cfg.Variant = tc.variant
		st, err := PolicyMetrics(b, cfg)
		if err != nil || !st.HasClip || !near(st.ClipRatioLow, tc.low, 1e-12) || !near(st.ClipRatioHigh, tc.high, 1e-12) ||
			!near(st.ClipRatio, tc.low+tc.high, 1e-12) {
			t.Errorf("%s: low %v high %v, want %v %v (%v)", tc.name, st.ClipRatioLow, st.ClipRatioHigh, tc.low, tc.high, err)
		}
	}
	// GSPO's denominator counts only sequences with a token.
	b := policyBatch()
	b.N, b.Advantages = 3, []float64{1, -1, 5}
	for _, f := range []*[]float64{&b.NewLogp, &b.OldLogp, &b.Entropy, &b.Mask} {
		*f = append(*f, 0, 0, 0)
	}
	b.TokenIDs = nil
	cfg := DefaultPolicyMetricsConfig()
	cfg.Variant = PolicyLossGSPO
	if st, err := PolicyMetrics(b, cfg); err != nil || st.ClipRatioLow != 0.5 || st.ClipRatioHigh != 0.5 {
		t.Errorf("GSPO with an empty sequence: low %v high %v (%v), want .5 .5", st.ClipRatioLow, st.ClipRatioHigh, err)
	}
	// ε_high apart from ε: e^.5 = 1.65 is inside 1 + .7.
	cfg = DefaultPolicyMetricsConfig()
	cfg.EpsilonHigh = 0.7
	if st, _ := PolicyMetrics(policyBatch(), cfg); st.ClipRatioHigh != 0 || !near(st.ClipRatioLow, 0.4, 1e-12) {
		t.Errorf("epsilon_high .7: high %v low %v, want 0 .4", st.ClipRatioHigh, st.ClipRatioLow)
	}
}

// TestPolicyMetricsTemperature: at T = 2 every log-prob is doubled before
// anything is computed (twinkle's rescaling to T = 1); entropies are not.
func TestPolicyMetricsTemperature(t *testing.T) {
	cfg := DefaultPolicyMetricsConfig()
	cfg.Temperature = 2
	st, err := PolicyMetrics(policyBatch(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"train/policy_confidence": math.Exp(-2.4),
		"train/mean_new_logp":     -2.4,
		"train/mean_old_logp":     -2.2,
		"train/logp_diff_mean":    -0.2,
		"train/approx_kl":         (k3(1) + 2*k3(-1)) / 5,
		"train/token_kl_max":      k3(1),
		"train/token_ratio_max":   math.E,
		"train/entropy":           0.9,
	}
	got := flattenPolicy(st)
	for k, v := range want {
		if !near(got[k], v, 1e-12) {
			t.Errorf("T=2: %s = %v, want %v", k, got[k], v)
		}
	}
	// d = .15 gives r = 1.16, inside 1.2 at T = 1; at T = 2, d = .3 and
	// r = 1.35 is clipped high (A > 0), the sequence ratio too for GSPO.
	b := TokenBatch{N: 1, T: 1, NewLogp: []float64{-1}, OldLogp: []float64{-1.15}, Mask: []float64{1}, Advantages: []float64{1}}
	for _, tc := range []struct {
		temp    float64
		variant PolicyLossVariant
		high    float64
	}{{1, PolicyLossGRPO, 0}, {0, PolicyLossGRPO, 0}, {2, PolicyLossGRPO, 1}, {2, PolicyLossGSPO, 1}, {2, PolicyLossCISPO, 1}, {0.5, PolicyLossGRPO, 0}} {
		cfg := PolicyMetricsConfig{EpsilonLow: 0.2, Temperature: tc.temp, Variant: tc.variant}
		if st, err := PolicyMetrics(b, cfg); err != nil || st.ClipRatioHigh != tc.high || !near(st.LogpDiffMean, 0.15*logpScale(tc.temp), 1e-12) {
			t.Errorf("T=%v variant %d: high %v diff %v (%v), want %v", tc.temp, tc.variant, st.ClipRatioHigh, st.LogpDiffMean, err, tc.high)
		}
	}
}

// TestPolicyMetricsTopK: the top-k tokens by K3, largest first, ties in
// batch order, only K3 > 0, each with its place, ids, log-probs and advantage.
func TestPolicyMetricsTopK(t *testing.T) {
	cfg := DefaultPolicyMetricsConfig()
	cfg.TopKKL = 2
	st, err := PolicyMetrics(policyBatch(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []HighKLToken{
		{Seq: 0, Pos: 0, TokenID: 10, KL: k3(0.5), Ratio: math.Exp(0.5), LogpNew: -1, LogpOld: -1.5, Advantage: 1},
		{Seq: 1, Pos: 1, TokenID: 14, KL: k3(-0.5), Ratio: math.Exp(-0.5), LogpNew: -1, LogpOld: -0.5, Advantage: -1},
	}
	if len(st.HighKL) != len(want) {
		t.Fatalf("top-2 = %+v", st.HighKL)
	}
	for i, w := range want {
		g := st.HighKL[i]
		if g.Seq != w.Seq || g.Pos != w.Pos || g.TokenID != w.TokenID || !near(g.KL, w.KL, 1e-15) || !near(g.Ratio, w.Ratio, 1e-15) ||
			g.LogpNew != w.LogpNew || g.LogpOld != w.LogpOld || g.Advantage != w.Advantage {
			t.Errorf("top-2[%d] = %+v, want %+v", i, g, w)
		}
	}
	cfg.TopKKL = 10 // the two tokens with d = 0 have K3 = 0 and are not recorded
	if st, _ := PolicyMetrics(policyBatch(), cfg); len(st.HighKL) != 3 {
		t.Errorf("top-10 = %d tokens, want the 3 with K3 > 0", len(st.HighKL))
	}
	if st, _ := PolicyMetrics(policyBatch(), DefaultPolicyMetricsConfig()); st.HighKL != nil {
		t.Errorf("top_k_kl 0 recorded %v", st.HighKL)
	}
}

// TestPolicyMetricsEmptyAndPartial: an all-masked batch gives no key at
// all (twinkle: empty outputs -> empty dict), never NaN; without old
// log-probs only the new-log-prob keys; without advantages no clip keys.
func TestPolicyMetricsEmptyAndPartial(t *testing.T) {
	b := policyBatch()
	b.Mask = make([]float64, 6)
	st, err := PolicyMetrics(b, DefaultPolicyMetricsConfig())
	if err != nil || st.Tokens != 0 {
		t.Fatalf("all masked: %+v %v", st, err)
	}
	got, none := flattenPolicy(st), StepMetrics{}.Flatten()
	for k, v := range got {
		if _, base := none[k]; math.IsNaN(v) || !base {
			t.Errorf("all-masked batch wrote %s = %v", k, v)
		}
	}
	for _, k := range twinkleKeys {
		if _, ok := got[k]; ok {
			t.Errorf("all-masked batch wrote %s", k)
		}
	}
	if st, err := PolicyMetrics(TokenBatch{}, DefaultPolicyMetricsConfig()); err != nil || st.Tokens != 0 {
		t.Errorf("zero batch: %+v %v", st, err)
	}
	b = policyBatch()
	b.OldLogp, b.Entropy = nil, nil
	st, err = PolicyMetrics(b, DefaultPolicyMetricsConfig())
	got = flattenPolicy(st)
	if _, ok := got["train/approx_kl"]; err != nil || ok || st.HasClip || got["train/mean_new_logp"] != -1.2 || len(got) != 2+len(flattenPolicy(PolicyStats{})) {
		t.Errorf("new log-probs only: %v (%v)", got, err)
	}
	b = policyBatch()
	b.Advantages = nil
	if st, err := PolicyMetrics(b, DefaultPolicyMetricsConfig()); err != nil || st.HasClip || !st.HasOld {
		t.Errorf("no advantages: %+v (%v)", st, err)
	}
}

func TestPolicyMetricsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*TokenBatch)
		want error
	}{
		{"NaN new log-prob on a counted token", func(b *TokenBatch) { b.NewLogp[0] = math.NaN() }, ErrNonFinite},
		{"Inf old log-prob on a counted token", func(b *TokenBatch) { b.OldLogp[3] = math.Inf(-1) }, ErrNonFinite},
		{"short mask", func(b *TokenBatch) { b.Mask = b.Mask[:5] }, ErrShape},
		{"short old log-probs", func(b *TokenBatch) { b.OldLogp = b.OldLogp[:2] }, ErrShape},
		{"advantages length", func(b *TokenBatch) { b.Advantages = []float64{1} }, ErrShape},
		{"Inf advantage", func(b *TokenBatch) { b.Advantages[0] = math.Inf(1) }, ErrNonFinite},
		{"token ids length", func(b *TokenBatch) { b.TokenIDs = b.TokenIDs[:1] }, ErrShape},
		{"negative N", func(b *TokenBatch) { b.N = -1 }, ErrShape},
	} {
		b := policyBatch()
		tc.mut(&b)
		if _, err := PolicyMetrics(b, DefaultPolicyMetricsConfig()); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}
