package rewards

import (
	"errors"
	"math"
	"testing"
)

// policyBatch is a hand-computed batch: N=2, T=3, 5 masked tokens with
// d = new - old = [.5 0 | 0 -.5 -.5].
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

func k3(d float64) float64 { return math.Exp(d) - d - 1 }

func TestPolicyMetricsValues(t *testing.T) {
	cfg := DefaultPolicyMetricsConfig()
	cfg.TopKKL = 2
	st, err := PolicyMetrics(policyBatch(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// spec §3.3 formulas on the batch above.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"tokens", float64(st.Tokens), 5},
		{"mean_new_logp", st.MeanNewLogp, -1.2},
		{"policy_confidence", st.PolicyConfidence, math.Exp(-1.2)},
		{"mean_old_logp", st.MeanOldLogp, -1.1},
		{"logp_diff_mean", st.LogpDiffMean, -0.1},
		{"approx_kl", st.ApproxKL, (k3(0.5) + 2*k3(-0.5)) / 5},
		{"token_kl_max", st.TokenKLMax, k3(0.5)},
		{"token_ratio_max", st.TokenRatioMax, math.Exp(0.5)},
		{"entropy", st.Entropy, 0.9},
		// ratio e^.5 > 1.2 with A>0 (high); e^-.5 < .8 twice with A<0 (low).
		{"clip_ratio_low", st.ClipRatioLow, 0.4},
		{"clip_ratio_high", st.ClipRatioHigh, 0.2},
		{"clip_ratio", st.ClipRatio, 0.6},
	}
	for _, c := range checks {
		if !near(c.got, c.want, 1e-12) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(st.HighKL) != 2 || st.HighKL[0] != (HighKLToken{Seq: 0, Pos: 0, TokenID: 10, KL: k3(0.5), Ratio: math.Exp(0.5), LogpNew: -1, LogpOld: -1.5}) ||
		st.HighKL[1].Seq != 1 || st.HighKL[1].Pos != 1 || st.HighKL[1].TokenID != 14 {
		t.Errorf("top-k KL = %+v", st.HighKL)
	}
}

func TestPolicyMetricsClipVariants(t *testing.T) {
	b := policyBatch()
	b.Advantages = []float64{-1, -1} // the high-ratio token now has A < 0
	tests := []struct {
		variant   PolicyLossVariant
		low, high float64
		source    string
	}{
		{PolicyLossGRPO, 0.4, 0, "sign-gated: the e^.5 token has A<0, not counted high"},
		{PolicyLossCISPO, 0.4, 0.2, "CISPO: not gated on the advantage sign"},
		// GSPO: sequence ratios e^.25 = 1.28 (A<0: not high) and e^(-1/3) = .72 (A<0: low).
		{PolicyLossGSPO, 0.5, 0, "GSPO: sequence-level, denominator 2 sequences"},
	}
	for _, tc := range tests {
		cfg := DefaultPolicyMetricsConfig()
		cfg.Variant = tc.variant
		st, err := PolicyMetrics(b, cfg)
		if err != nil || !near(st.ClipRatioLow, tc.low, 1e-12) || !near(st.ClipRatioHigh, tc.high, 1e-12) {
			t.Errorf("variant %d (%s): low %v high %v, want %v %v (%v)", tc.variant, tc.source, st.ClipRatioLow, st.ClipRatioHigh, tc.low, tc.high, err)
		}
	}
	// epsilon_high separate from epsilon: e^.5 = 1.65 is inside 1+0.7.
	cfg := DefaultPolicyMetricsConfig()
	cfg.EpsilonHigh = 0.7
	if st, _ := PolicyMetrics(policyBatch(), cfg); st.ClipRatioHigh != 0 || !near(st.ClipRatioLow, 0.4, 1e-12) {
		t.Errorf("epsilon_high 0.7: high %v low %v", st.ClipRatioHigh, st.ClipRatioLow)
	}
}

func TestPolicyMetricsReferenceKL(t *testing.T) {
	b := policyBatch()
	b.RefLogp = []float64{-1, -2, 0, -0.5, -1, 8.5} // last token: ref - new = 10, clamped to 5
	st, err := PolicyMetrics(b, DefaultPolicyMetricsConfig())
	if err != nil {
		t.Fatal(err)
	}
	if want := k3(5) / 5; !st.HasRef || !near(st.KL, want, 1e-12) {
		t.Errorf("kl = %v, want %v (spec §1.9a clamp ±5)", st.KL, want)
	}
	// both completions are in bucket 0-32 (2 and 3 tokens).
	if st.KLBucketTokens[0] != 5 || !near(st.KLBuckets[0], k3(5)/5, 1e-12) {
		t.Errorf("KL buckets = %v / %v", st.KLBuckets, st.KLBucketTokens)
	}
}

func TestPolicyMetricsTemperatureAndEdges(t *testing.T) {
	cfg := DefaultPolicyMetricsConfig()
	cfg.Temperature = 2 // spec §3.3: log-probs × T
	st, _ := PolicyMetrics(policyBatch(), cfg)
	if !near(st.MeanNewLogp, -2.4, 1e-12) || !near(st.LogpDiffMean, -0.2, 1e-12) {
		t.Errorf("T=2: mean_new %v diff %v, want -2.4 -0.2", st.MeanNewLogp, st.LogpDiffMean)
	}
	// twinkle: empty outputs -> empty dict.
	b := policyBatch()
	b.Mask = make([]float64, 6)
	if st, err := PolicyMetrics(b, cfg); err != nil || st.Tokens != 0 || len((StepMetrics{Policy: &st}).Flatten()) != len((StepMetrics{}).Flatten()) {
		t.Errorf("empty mask: %+v %v", st, err)
	}
	if st, err := PolicyMetrics(TokenBatch{}, cfg); err != nil || st.Tokens != 0 {
		t.Errorf("zero batch: %+v %v", st, err)
	}
	// only new log-probs: no old/clip/entropy stats.
	b = TokenBatch{N: 1, T: 2, NewLogp: []float64{-1, -1}, Mask: []float64{1, 1}}
	if st, err := PolicyMetrics(b, cfg); err != nil || st.HasOld || st.HasClip || st.HasEntropy || st.Tokens != 2 {
		t.Errorf("new-only: %+v %v", st, err)
	}
	errCases := []struct {
		name string
		mut  func(*TokenBatch)
		want error
	}{
		{"NaN on masked token", func(b *TokenBatch) { b.NewLogp[0] = math.NaN() }, ErrNonFinite},
		{"short mask", func(b *TokenBatch) { b.Mask = b.Mask[:5] }, ErrShape},
		{"advantages length", func(b *TokenBatch) { b.Advantages = []float64{1} }, ErrShape},
		{"Inf advantage", func(b *TokenBatch) { b.Advantages[0] = math.Inf(1) }, ErrNonFinite},
		{"negative N", func(b *TokenBatch) { b.N = -1 }, ErrShape},
	}
	for _, tc := range errCases {
		b := policyBatch()
		tc.mut(&b)
		if _, err := PolicyMetrics(b, cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}
