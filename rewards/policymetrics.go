package rewards

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// PolicyLossVariant selects how clipping is counted in the policy metrics
// (spec §3.3): the rule of the policy loss in use.
type PolicyLossVariant int

const (
	// PolicyLossGRPO counts clipped tokens, gated on the advantage sign
	// (twinkle GRPOMetric). It is the zero value.
	PolicyLossGRPO PolicyLossVariant = iota
	// PolicyLossGSPO counts clipped sequences using the sequence ratio
	// exp(masked mean of new − old), gated on the sign (GSPOMetric).
	PolicyLossGSPO
	// PolicyLossCISPO counts clipped tokens regardless of the advantage sign
	// (CISPOMetric).
	PolicyLossCISPO
)

// PolicyMetricsConfig are the settings of PolicyMetrics (twinkle GRPOMetric
// constructor, spec §3.3).
type PolicyMetricsConfig struct {
	// EpsilonLow is the lower clip range ε (ratio < 1−ε); twinkle's default 0.2.
	EpsilonLow float64
	// EpsilonHigh is the upper clip range (ratio > 1+ε_high); 0 means EpsilonLow.
	EpsilonHigh float64
	// Temperature is the sampling temperature the log-probs were taken at.
	// When > 0 and != 1 every log-prob is multiplied by it before anything
	// is computed, as twinkle rescales to T = 1.
	Temperature float64
	// TopKKL records the TopKKL tokens with the largest positive K3 (0 = off).
	TopKKL int
	// Variant selects the clip counting rule.
	Variant PolicyLossVariant
}

// DefaultPolicyMetricsConfig returns twinkle's defaults: ε = 0.2, ε_high = ε,
// temperature 1, no top-k records, GRPO clip counting.
func DefaultPolicyMetricsConfig() PolicyMetricsConfig {
	return PolicyMetricsConfig{EpsilonLow: 0.2, Temperature: 1}
}

// TokenBatch holds per-token values of N sequences padded to length T, each
// flat [N·T] with token t of sequence n at n·T+t.
type TokenBatch struct {
	// N is the number of sequences and T their padded length.
	N, T int
	// NewLogp are the current policy's token log-probs (required).
	NewLogp []float64
	// OldLogp are the behaviour (rollout) log-probs; nil if unknown.
	OldLogp []float64
	// Entropy are the policy's per-token entropies; nil if unknown.
	Entropy []float64
	// Mask is 1 for completion tokens that count, 0 elsewhere (required).
	Mask []float64
	// Advantages are per sequence [N]; nil if unknown (no clip statistics).
	Advantages []float64
	// TokenIDs are the token ids, used only in HighKLToken; may be nil.
	TokenIDs []int
}

// HighKLToken is one of the top-k tokens by K3 (twinkle's _high_kl_records).
type HighKLToken struct {
	// Seq and Pos locate the token; TokenID is -1 when unknown.
	Seq, Pos, TokenID int
	// KL is the token's K3, Ratio exp(new − old).
	KL, Ratio float64
	// LogpNew and LogpOld are the token's (rescaled) log-probs.
	LogpNew, LogpOld float64
	// Advantage is its sequence's advantage (0 when unknown).
	Advantage float64
}

// PolicyStats are twinkle's policy diagnostics of one step (spec §3.3).
type PolicyStats struct {
	// Tokens is the number of masked tokens n.
	Tokens int
	// MeanNewLogp = Σ new / n; PolicyConfidence = exp(MeanNewLogp).
	MeanNewLogp, PolicyConfidence float64
	// HasOld is true when old log-probs were given and the next five are set.
	HasOld bool
	// MeanOldLogp = Σ old / n; LogpDiffMean = Σ d / n with d = new − old.
	MeanOldLogp, LogpDiffMean float64
	// ApproxKL = Σ (e^d − d − 1) / n, Schulman's K3 of KL(old‖new), no clamp.
	ApproxKL float64
	// TokenKLMax and TokenRatioMax are the largest masked K3 and e^d.
	TokenKLMax, TokenRatioMax float64
	// HasEntropy is true when per-token entropies were given.
	HasEntropy bool
	// Entropy is the token-mean policy entropy (not rescaled).
	Entropy float64
	// HasClip is true when old log-probs and advantages were given.
	HasClip bool
	// ClipRatioLow, ClipRatioHigh and ClipRatio = low + high are fractions of
	// the counted tokens (sequences for GSPO).
	ClipRatio, ClipRatioLow, ClipRatioHigh float64
	// HighKL are the top-k tokens by K3, largest first.
	HighKL []HighKLToken
}

// policySums accumulates the masked sums of PolicyMetrics.
type policySums struct {
	n                         int
	newLp, oldLp, d, k3, ent  float64
	tokenKLMax, tokenRatioMax float64
	high                      []HighKLToken
}

// PolicyMetrics computes twinkle's GRPOMetric (GSPOMetric, CISPOMetric by
// cfg.Variant) from per-token log-probs. With n = Σ mask, log-probs
// multiplied by cfg.Temperature, and d = new − old:
//
//	policy_confidence = exp(Σ new / n);  approx_kl = Σ (e^d − d − 1) / n
//	clip_low = #(r < 1−ε ∧ A < 0) / N_clip;  clip_high = #(r > 1+ε_h ∧ A > 0) / N_clip
//
// (GSPO counts sequences with r = exp(masked mean d); CISPO drops the sign
// gate.) A batch with no masked token returns Tokens = 0 and nothing else.
// Non-finite values on masked tokens return ErrNonFinite.
func PolicyMetrics(b TokenBatch, cfg PolicyMetricsConfig) (PolicyStats, error) {
	if err := b.check(); err != nil {
		return PolicyStats{}, fmt.Errorf("policy metrics: %w", err)
	}
	scale := logpScale(cfg.Temperature)
	st := PolicyStats{HasOld: b.OldLogp != nil, HasEntropy: b.Entropy != nil}
	var s policySums
	for i, m := range b.Mask {
		if m > 0 {
			s.add(b, i, scale, cfg.TopKKL > 0)
		}
	}
	if s.n == 0 {
		return PolicyStats{}, nil
	}
	n := float64(s.n)
	st.Tokens = s.n
	st.MeanNewLogp = s.newLp / n
	st.PolicyConfidence = math.Exp(st.MeanNewLogp)
	if st.HasOld {
		st.MeanOldLogp, st.LogpDiffMean, st.ApproxKL = s.oldLp/n, s.d/n, s.k3/n
		st.TokenKLMax, st.TokenRatioMax = s.tokenKLMax, s.tokenRatioMax
	}
	if st.HasEntropy {
		st.Entropy = s.ent / n
	}
	if st.HasOld && b.Advantages != nil {
		st.HasClip = true
		st.ClipRatioLow, st.ClipRatioHigh = clipFractions(b, cfg, scale)
		st.ClipRatio = st.ClipRatioLow + st.ClipRatioHigh
	}
	st.HighKL = topKL(s.high, cfg.TopKKL)
	return st, nil
}

// logpScale is the factor twinkle multiplies log-probs by: the temperature
// when it is > 0 and != 1, else 1.
func logpScale(temperature float64) float64 {
	if temperature > 0 && temperature != 1 {
		return temperature
	}
	return 1
}

// add accumulates masked token i.
func (s *policySums) add(b TokenBatch, i int, scale float64, top bool) {
	s.n++
	lp := b.NewLogp[i] * scale
	s.newLp += lp
	if b.Entropy != nil {
		s.ent += b.Entropy[i]
	}
	if b.OldLogp == nil {
		return
	}
	old := b.OldLogp[i] * scale
	d := lp - old
	r := math.Exp(d)
	k3 := r - d - 1
	s.oldLp += old
	s.d += d
	s.k3 += k3
	s.tokenKLMax, s.tokenRatioMax = max(s.tokenKLMax, k3), max(s.tokenRatioMax, r)
	if top && k3 > 0 {
		s.high = append(s.high, b.highKL(i, k3, lp, old))
	}
}

// check validates the shapes and the finiteness of masked values.
func (b TokenBatch) check() error {
	if b.N < 0 || b.T < 0 {
		return fmt.Errorf("N=%d T=%d: %w", b.N, b.T, ErrShape)
	}
	nt := b.N * b.T
	if err := checkLen("mask", len(b.Mask), nt); err != nil {
		return err
	}
	for _, f := range []struct {
		name     string
		x        []float64
		optional bool
	}{{"new logp", b.NewLogp, false}, {"old logp", b.OldLogp, true}, {"entropy", b.Entropy, true}} {
		if f.optional && f.x == nil {
			continue
		}
		if err := checkLen(f.name, len(f.x), nt); err != nil {
			return err
		}
		for i, v := range f.x {
			if b.Mask[i] > 0 && !isFinite(v) {
				return fmt.Errorf("%s[%d]=%v on a masked token: %w", f.name, i, v, ErrNonFinite)
			}
		}
	}
	if b.Advantages != nil {
		if err := checkLen("advantages", len(b.Advantages), b.N); err != nil {
			return err
		}
		if err := checkFinite("advantages", b.Advantages); err != nil {
			return err
		}
	}
	if b.TokenIDs != nil {
		return checkLen("token ids", len(b.TokenIDs), nt)
	}
	return nil
}

// highKL records token i for the top-k list.
func (b TokenBatch) highKL(i int, k3, lp, old float64) HighKLToken {
	h := HighKLToken{Seq: i / b.T, Pos: i % b.T, TokenID: -1, KL: k3, Ratio: math.Exp(lp - old),
		LogpNew: lp, LogpOld: old}
	if b.TokenIDs != nil {
		h.TokenID = b.TokenIDs[i]
	}
	if b.Advantages != nil {
		h.Advantage = b.Advantages[h.Seq]
	}
	return h
}

// topKL returns the k tokens with the largest KL, largest first (ties in
// batch order).
func topKL(h []HighKLToken, k int) []HighKLToken {
	if k <= 0 || len(h) == 0 {
		return nil
	}
	slices.SortStableFunc(h, func(a, b HighKLToken) int { return cmp.Compare(b.KL, a.KL) })
	return slices.Clip(h[:min(k, len(h))])
}

// clipFractions counts clipped tokens (or sequences for GSPO).
func clipFractions(b TokenBatch, cfg PolicyMetricsConfig, scale float64) (low, high float64) {
	epsLo, epsHi := cfg.EpsilonLow, cfg.EpsilonHigh
	if epsHi == 0 {
		epsHi = epsLo
	}
	var nLow, nHigh, count int
	clip := func(r, a float64, gated bool) {
		count++
		if r < 1-epsLo && (!gated || a < 0) {
			nLow++
		}
		if r > 1+epsHi && (!gated || a > 0) {
			nHigh++
		}
	}
	for s := range b.N {
		a := b.Advantages[s]
		var sumD float64
		var n int
		for t := range b.T {
			i := s*b.T + t
			if b.Mask[i] <= 0 {
				continue
			}
			d := (b.NewLogp[i] - b.OldLogp[i]) * scale
			if cfg.Variant == PolicyLossGSPO {
				sumD += d
				n++
				continue
			}
			clip(math.Exp(d), a, cfg.Variant == PolicyLossGRPO)
		}
		if cfg.Variant == PolicyLossGSPO && n > 0 {
			clip(math.Exp(sumD/float64(n)), a, true)
		}
	}
	if count == 0 {
		return 0, 0
	}
	return float64(nLow) / float64(count), float64(nHigh) / float64(count)
}
