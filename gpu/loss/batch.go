package loss

import (
	"errors"
	"fmt"
	"math"
)

// ErrShape is wrapped by every error about slice lengths or sizes.
var ErrShape = errors.New("loss: batch shape mismatch")

// Batch is the data a loss needs besides the current log-probs. Every
// [N·T] slice is row-major (sequence i, token t at i·T + t). Nothing in it
// is modified.
type Batch struct {
	// N is the number of sequences, T the padded completion length.
	N, T int
	// Mask [N·T] is 1 on completion tokens and 0 on padding.
	Mask []float64
	// OldLogp [N·T] are the log-probs of the policy the ratio is taken
	// against (the learner's pre-update policy, the sampler's when on
	// policy). nil means "equal to lp, detached": every ratio is 1.
	OldLogp []float64
	// BehaviourLogp [N·T] are the log-probs of the policy that sampled the
	// rollout, when it is older than OldLogp's (stale samples). Used with
	// Config.ISTruncation; nil = not stale.
	BehaviourLogp []float64
	// RefLogp [N·T] are the reference model's log-probs; needed when
	// Config.Beta != 0, and used for Stats.KL whenever present.
	RefLogp []float64
	// Advantages [N] hold one advantage per sequence.
	Advantages []float64
	// GroupSize is K, the completions per prompt (listwise loss only);
	// group g is sequences g·K .. g·K+K−1.
	GroupSize int
	// Weights [N] are the listwise target weights w_i (listwise loss only;
	// each group's weights sum to 1).
	Weights []float64
}

// Result is a loss value, its gradients and its statistics.
type Result struct {
	// Loss is the scalar to minimise.
	Loss float64
	// DLogp [N·T] is dLoss/dlp, zero where Mask is 0.
	DLogp []float64
	// DEntropy [N·T] is dLoss/dH; nil when the loss has no entropy term.
	DEntropy []float64
	// Stats are diagnostics for metrics.
	Stats Stats
}

// Stats are diagnostics of one loss evaluation. Fractions and means are
// over completion tokens, or over sequences for GSPO and listwise.
type Stats struct {
	// Tokens is Σ Mask.
	Tokens float64
	// PolicyLoss is the policy term of Loss (after aggregation, IS weights
	// and, for listwise, before the clip term and scale).
	PolicyLoss float64
	// KLLoss is Beta times the aggregated k3 term of Loss.
	KLLoss float64
	// KL is the token-mean k3 of (ref − lp) over completion tokens; 0 when
	// RefLogp is nil.
	KL float64
	// ClipLow is the fraction clipped at the bottom: ratio < 1−ε with A < 0
	// (for CISPO: any ratio < 1−ε).
	ClipLow float64
	// ClipHigh is the fraction clipped at the top: ratio > 1+ε_high with
	// A > 0 (for CISPO: any ratio > 1+ε_high).
	ClipHigh float64
	// ClipRegion is ClipLow + ClipHigh.
	ClipRegion float64
	// RatioMean is the mean importance ratio π/π_old (after the log clamp).
	RatioMean float64
	// ISWeightMean is the mean truncated IS weight (1 when not used).
	ISWeightMean float64
	// ISTruncatedFrac is the fraction of IS weights capped at ISTruncation.
	ISTruncatedFrac float64
	// Entropy is the token-mean of H (entropy objective only).
	Entropy float64
	// EntropyBasis is the normalised entropy the bonus multiplies.
	EntropyBasis float64
	// EntropyBonus is −alpha·EntropyBasis, the entropy term of Loss.
	EntropyBonus float64
	// ListwiseClipLoss is coef·L_clip before the scale (listwise only).
	ListwiseClipLoss float64
	// ActiveGroups is the number of groups in the listwise mean.
	ActiveGroups int
}

// check validates the lengths every loss needs, plus the optional slices
// that are set. lp is checked against N·T too.
func (b Batch) check(lp []float64) error {
	if b.N <= 0 || b.T <= 0 {
		return fmt.Errorf("%w: N=%d, T=%d: both must be positive", ErrShape, b.N, b.T)
	}
	nt := b.N * b.T
	for _, s := range []struct {
		name     string
		n        int
		optional bool
	}{
		{"lp", len(lp), false}, {"Mask", len(b.Mask), false},
		{"OldLogp", len(b.OldLogp), b.OldLogp == nil},
		{"BehaviourLogp", len(b.BehaviourLogp), b.BehaviourLogp == nil},
		{"RefLogp", len(b.RefLogp), b.RefLogp == nil},
	} {
		if !s.optional && s.n != nt {
			return fmt.Errorf("%w: len(%s)=%d, want N·T=%d", ErrShape, s.name, s.n, nt)
		}
	}
	return nil
}

// checkAdvantages validates Advantages for the policy losses.
func (b Batch) checkAdvantages() error {
	if len(b.Advantages) != b.N {
		return fmt.Errorf("%w: len(Advantages)=%d, want N=%d", ErrShape, len(b.Advantages), b.N)
	}
	return nil
}

// old returns the old log-prob of token k (lp itself when OldLogp is nil).
func (b Batch) old(lp []float64, k int) float64 {
	if b.OldLogp == nil {
		return lp[k]
	}
	return b.OldLogp[k]
}

// seqTokens returns n_i = Σ_t m_it for every sequence and the total.
func (b Batch) seqTokens() ([]float64, float64) {
	n := make([]float64, b.N)
	var total float64
	for i := range n {
		for _, m := range b.Mask[i*b.T : (i+1)*b.T] {
			n[i] += m
		}
		total += n[i]
	}
	return n, total
}

// tokenCoef returns a_it, the weight of token (i, t) in the aggregation
// Σ a_it L_it of cfg.Type (spec §1.9a), and the per-sequence token counts.
func tokenCoef(cfg Config, b Batch) (coef, n []float64) {
	n, total := b.seqTokens()
	coef = make([]float64, b.N*b.T)
	for i := range b.N {
		var c float64
		switch cfg.Type {
		case TypeGRPO:
			c = 1 / (float64(b.N) * math.Max(n[i], 1))
		case TypeBNPO:
			c = 1 / math.Max(total, 1)
		case TypeDrGRPO:
			c = 1 / drDenominator(cfg, b, total)
		}
		for t := range b.T {
			k := i*b.T + t
			coef[k] = c * b.Mask[k]
		}
	}
	return coef, n
}

// drDenominator is D of dr_grpo.
func drDenominator(cfg Config, b Batch, total float64) float64 {
	if cfg.DrGRPODenominator == DenomActiveTokens {
		return math.Max(total, 1)
	}
	l := cfg.MaxCompletionLen
	if l == 0 {
		l = b.T
	}
	return float64(b.N * l)
}

// clampGrad returns clamp(x, lo, hi) and its derivative as torch.clamp's
// backward gives it: 1 on the closed interval [lo, hi], 0 outside.
func clampGrad(x, lo, hi float64) (float64, float64) {
	switch {
	case x < lo:
		return lo, 0
	case x > hi:
		return hi, 0
	}
	return x, 1
}

// minGrad returns min(a, b) and the weights its gradient gives a and b:
// the smaller branch gets 1, a tie splits 1/2 and 1/2 (torch.minimum).
func minGrad(a, b float64) (v, da, db float64) {
	switch {
	case a < b:
		return a, 1, 0
	case b < a:
		return b, 0, 1
	}
	return a, 0.5, 0.5
}

// k3 returns the k3 KL estimate exp(d) − d − 1 with d = clamp(ref − lp,
// ±LogRatioClamp), and its derivative with respect to lp.
func k3(ref, lp float64) (float64, float64) {
	d, g := clampGrad(ref-lp, -LogRatioClamp, LogRatioClamp)
	e := math.Exp(d)
	return e - d - 1, -(e - 1) * g
}

// meanK3 is the token-mean k3 over completion tokens (0 without RefLogp).
func meanK3(b Batch, lp []float64) float64 {
	if b.RefLogp == nil {
		return 0
	}
	var sum, cnt float64
	for k, m := range b.Mask {
		if m == 0 {
			continue
		}
		v, _ := k3(b.RefLogp[k], lp[k])
		sum += v * m
		cnt += m
	}
	return sum / math.Max(cnt, 1)
}

// MeanK3 is the token-mean k3 KL estimate of (RefLogp − lp) over
// completion tokens, the measure ResolveAlpha takes (spec §1.9a); 0 when
// RefLogp is nil.
func MeanK3(b Batch, lp []float64) (float64, error) {
	if err := b.check(lp); err != nil {
		return 0, fmt.Errorf("mean k3: %w", err)
	}
	return meanK3(b, lp), nil
}

// isWeight returns the detached truncated IS weight min(exp(old −
// behaviour), C) for a log-ratio old − behaviour, and whether it was capped.
func isWeight(logRatio, c float64) (float64, bool) {
	w := math.Exp(logRatio)
	if w > c {
		return c, true
	}
	return w, false
}
