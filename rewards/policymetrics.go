package rewards

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// PolicyLossVariant selects how clipping is counted in the policy metrics
// (spec §3.3, DESIGN §3).
type PolicyLossVariant int

const (
	// PolicyLossGRPO counts clipped tokens, gated on the advantage sign
	// (GRPOMetric). It is the zero value.
	PolicyLossGRPO PolicyLossVariant = iota
	// PolicyLossGSPO counts clipped sequences using the sequence ratio
	// exp(masked mean of new - old), gated on the sign (GSPOMetric).
	PolicyLossGSPO
	// PolicyLossCISPO counts clipped tokens regardless of the advantage sign
	// (CISPOMetric).
	PolicyLossCISPO
)

// LogDeltaClamp bounds the reference log-ratio in the KL estimate (spec §1.9a).
const LogDeltaClamp = 5.0

// PolicyMetricsConfig are the settings of PolicyMetrics (twinkle GRPOMetric
// constructor, spec §3.3).
type PolicyMetricsConfig struct {
	// EpsilonLow is the lower clip range ε (ratio < 1-ε); default 0.2.
	EpsilonLow float64
	// EpsilonHigh is the upper clip range (ratio > 1+ε_high); 0 means EpsilonLow.
	EpsilonHigh float64
	// Temperature rescales log-probs to T = 1 by multiplying them by it when
	// > 0 and != 1.
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
// flat [N*T] with token t of sequence n at n*T+t.
type TokenBatch struct {
	// N is the number of sequences and T their padded length.
	N, T int
	// NewLogp are the current policy's token log-probs (required).
	NewLogp []float64
	// OldLogp are the behaviour (rollout) log-probs; nil if unknown.
	OldLogp []float64
	// RefLogp are the reference model's log-probs; nil if unknown.
	RefLogp []float64
	// Entropy are the policy's per-token entropies; nil if unknown.
	Entropy []float64
	// Mask is 1 for completion tokens that count, 0 elsewhere (required).
	Mask []float64
	// Advantages are per sequence [N]; nil if unknown (no clip statistics).
	Advantages []float64
	// TokenIDs are the token ids, used only in HighKLToken; may be nil.
	TokenIDs []int
}

// HighKLToken is one of the top-k tokens by K3 (twinkle _high_kl_records).
type HighKLToken struct {
	// Seq and Pos locate the token; TokenID is -1 when unknown.
	Seq, Pos, TokenID int
	// KL is the token's K3, Ratio exp(new - old).
	KL, Ratio float64
	// LogpNew and LogpOld are the token's log-probs.
	LogpNew, LogpOld float64
}

// PolicyStats are the policy-loss diagnostics of one step (spec §3.3).
type PolicyStats struct {
	// Tokens is the number of masked tokens n.
	Tokens int
	// MeanNewLogp = Σ new / n; PolicyConfidence = exp(MeanNewLogp).
	MeanNewLogp, PolicyConfidence float64
	// HasOld is true when old log-probs were given and the next five are set.
	HasOld bool
	// MeanOldLogp = Σ old / n; LogpDiffMean = Σ d / n with d = new - old.
	MeanOldLogp, LogpDiffMean float64
	// ApproxKL = Σ (e^d - d - 1) / n, Schulman's K3 of KL(old‖new), no clamp.
	ApproxKL float64
	// TokenKLMax and TokenRatioMax are the largest masked K3 and e^d.
	TokenKLMax, TokenRatioMax float64
	// HasEntropy is true when per-token entropies were given.
	HasEntropy bool
	// Entropy is the token-mean policy entropy.
	Entropy float64
	// HasRef is true when reference log-probs were given.
	HasRef bool
	// KL is the token-mean K3 to the reference, d = clamp(ref - new, ±5).
	KL float64
	// KLBuckets is KL over the tokens of completions whose length falls in
	// each bucket 0-32, 33-64, 65-128, 129-256, 257+ (token-weighted);
	// KLBucketTokens are the token counts.
	KLBuckets      [5]float64
	KLBucketTokens [5]int
	// HasClip is true when old log-probs and advantages were given.
	HasClip bool
	// ClipRatioLow, ClipRatioHigh and ClipRatio = low + high are fractions of
	// the counted tokens (sequences for GSPO).
	ClipRatio, ClipRatioLow, ClipRatioHigh float64
	// HighKL are the top-k tokens by K3, largest first.
	HighKL []HighKLToken
}

// PolicyMetrics computes the policy-loss diagnostics of spec §3.3 from
// per-token log-probs. With n = Σ mask and d = new - old:
//
//	policy_confidence = exp(Σ new / n);  approx_kl = Σ (e^d - d - 1) / n
//	clip_low = #(r < 1-ε ∧ A < 0) / N_clip;  clip_high = #(r > 1+ε_h ∧ A > 0) / N_clip
//
// (GSPO counts sequences with r = exp(masked mean d); CISPO drops the sign
// gate.) A batch with no masked token returns Tokens = 0 and nothing else.
// Non-finite log-probs on masked tokens return ErrNonFinite.
func PolicyMetrics(b TokenBatch, cfg PolicyMetricsConfig) (PolicyStats, error) {
	if err := b.check(); err != nil {
		return PolicyStats{}, fmt.Errorf("policy metrics: %w", err)
	}
	scale := 1.0
	if cfg.Temperature > 0 && cfg.Temperature != 1 {
		scale = cfg.Temperature
	}
	var st PolicyStats
	st.HasOld, st.HasRef, st.HasEntropy = b.OldLogp != nil, b.RefLogp != nil, b.Entropy != nil
	var sumNew, sumOld, sumD, sumK3, sumEnt, sumRef float64
	var high []HighKLToken
	for i, m := range b.Mask {
		if m <= 0 {
			continue
		}
		st.Tokens++
		lp := b.NewLogp[i] * scale
		sumNew += lp
		if st.HasOld {
			old := b.OldLogp[i] * scale
			d := lp - old
			k3 := math.Exp(d) - d - 1
			sumOld += old
			sumD += d
			sumK3 += k3
			st.TokenKLMax = max(st.TokenKLMax, k3)
			st.TokenRatioMax = max(st.TokenRatioMax, math.Exp(d))
			if cfg.TopKKL > 0 && k3 > 0 {
				high = append(high, b.highKL(i, k3, lp, old))
			}
		}
		if st.HasEntropy {
			sumEnt += b.Entropy[i]
		}
		if st.HasRef {
			d := min(max(b.RefLogp[i]-lp, -LogDeltaClamp), LogDeltaClamp)
			sumRef += math.Exp(d) - d - 1
		}
	}
	if st.Tokens == 0 {
		return PolicyStats{}, nil
	}
	n := float64(st.Tokens)
	st.MeanNewLogp = sumNew / n
	st.PolicyConfidence = math.Exp(st.MeanNewLogp)
	if st.HasOld {
		st.MeanOldLogp, st.LogpDiffMean, st.ApproxKL = sumOld/n, sumD/n, sumK3/n
	}
	if st.HasEntropy {
		st.Entropy = sumEnt / n
	}
	if st.HasRef {
		st.KL = sumRef / n
	}
	if st.HasOld && b.Advantages != nil {
		st.HasClip = true
		st.ClipRatioLow, st.ClipRatioHigh = clipFractions(b, cfg, scale)
		st.ClipRatio = st.ClipRatioLow + st.ClipRatioHigh
	}
	if st.HasRef {
		st.KLBuckets, st.KLBucketTokens = klBuckets(b, scale)
	}
	st.HighKL = topKL(high, cfg.TopKKL)
	if err := checkFinite("policy stats", []float64{st.MeanNewLogp, st.ApproxKL, st.Entropy, st.KL}); err != nil {
		return PolicyStats{}, fmt.Errorf("policy metrics: %w", err)
	}
	return st, nil
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
	}{{"new logp", b.NewLogp, false}, {"mask", b.Mask, false}, {"old logp", b.OldLogp, true},
		{"ref logp", b.RefLogp, true}, {"entropy", b.Entropy, true}} {
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
	id := -1
	if b.TokenIDs != nil {
		id = b.TokenIDs[i]
	}
	return HighKLToken{Seq: i / b.T, Pos: i % b.T, TokenID: id, KL: k3, Ratio: math.Exp(lp - old), LogpNew: lp, LogpOld: old}
}

// topKL returns the k tokens with the largest KL, largest first.
func topKL(h []HighKLToken, k int) []HighKLToken {
	if k <= 0 || len(h) == 0 {
		return nil
	}
	slices.SortStableFunc(h, func(a, b HighKLToken) int { return cmp.Compare(b.KL, a.KL) })
	return h[:min(k, len(h))]
}

// clipFractions counts clipped tokens (or sequences for GSPO).
func clipFractions(b TokenBatch, cfg PolicyMetricsConfig, scale float64) (low, high float64) {
	epsLo := cfg.EpsilonLow
	epsHi := cfg.EpsilonHigh
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

// klBuckets returns the token-mean reference K3 per completion-length bucket.
func klBuckets(b TokenBatch, scale float64) (kl [5]float64, tokens [5]int) {
	for s := range b.N {
		var sum float64
		var n int
		for t := range b.T {
			i := s*b.T + t
			if b.Mask[i] <= 0 {
				continue
			}
			d := min(max(b.RefLogp[i]-b.NewLogp[i]*scale, -LogDeltaClamp), LogDeltaClamp)
			sum += math.Exp(d) - d - 1
			n++
		}
		if n > 0 {
			k := klBucket(n)
			kl[k] += sum
			tokens[k] += n
		}
	}
	for k := range kl {
		if tokens[k] > 0 {
			kl[k] /= float64(tokens[k])
		}
	}
	return kl, tokens
}
