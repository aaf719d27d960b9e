package loss

import (
	"fmt"
	"math"
)

// MaxEntEntropy is the entropy-regularised MaxEnt objective (spec §1.9a):
// the policy loss of cfg.Policy minus alpha times a normalised entropy:
//
//	loss  = Policy(cfg, b, lp).Loss − alpha · basis
//	basis = mean_i( Σ_t H·m / max(n_i, 1) ) / ln V     (Type grpo, dr_grpo)
//	basis = Σ H·m / max(Σ m, 1) / ln V                 (Type bnpo)
//
// with ln V replaced by 1 when V ≤ 1. H [N·T] are the exact per-token
// entropies of the temperature-scaled policy over the V valid vocabulary
// entries; alpha is the effective coefficient (after ResolveAlpha). The
// result's DEntropy is −alpha · ∂basis/∂H.
func MaxEntEntropy(cfg Config, b Batch, lp, h []float64, alpha float64, vocabSize int) (Result, error) {
	if len(h) != b.N*b.T {
		return Result{}, fmt.Errorf("maxent entropy: %w: len(H)=%d, want N·T=%d", ErrShape, len(h), b.N*b.T)
	}
	if math.IsNaN(alpha) || math.IsInf(alpha, 0) {
		return Result{}, fmt.Errorf("maxent entropy: %w: alpha = %v: must be finite", ErrConfig, alpha)
	}
	res, err := Policy(cfg, b, lp)
	if err != nil {
		return Result{}, fmt.Errorf("maxent entropy: %w", err)
	}
	lnV := 1.0
	if vocabSize > 1 {
		lnV = math.Log(float64(vocabSize))
	}
	n, total := b.seqTokens()
	res.DEntropy = make([]float64, b.N*b.T)
	var basis, hSum float64
	for k, m := range b.Mask {
		if m == 0 {
			continue
		}
		var c float64 // ∂basis/∂H_k
		if cfg.Type == TypeBNPO {
			c = m / (math.Max(total, 1) * lnV)
		} else {
			c = m / (float64(b.N) * math.Max(n[k/b.T], 1) * lnV)
		}
		basis += c * h[k]
		hSum += m * h[k]
		res.DEntropy[k] = -alpha * c
	}
	st := &res.Stats
	st.Entropy = hSum / math.Max(total, 1)
	st.EntropyBasis = basis
	st.EntropyBonus = -alpha * basis
	res.Loss += st.EntropyBonus
	return res, nil
}

// AlphaControl holds the KL-adaptive alpha settings of spec §1.9a
// (maxent_alpha_* keys). The three switches combine.
type AlphaControl struct {
	// RaiseOnLowKL raises alpha when KL < Threshold:
	//   m = 1 + Gain·(Threshold − KL)/Threshold
	RaiseOnLowKL bool
	// LowerOnHighKL lowers alpha when KL > Threshold:
	//   m = 1/(1 + Gain·(KL − Threshold)/Threshold); non-finite KL gives MinMultiplier.
	LowerOnHighKL bool
	// DisableOutsideTrustZone sets alpha to 0 when KL > Threshold or KL is
	// not finite.
	DisableOutsideTrustZone bool
	// Threshold is the KL target (0.04 in the original), > 0.
	Threshold float64
	// Gain scales the multiplier's response (1.0), >= 0.
	Gain float64
	// MinMultiplier is the smallest multiplier, in (0, 1] (0.5).
	MinMultiplier float64
	// MaxMultiplier is the largest multiplier, >= 1 (2.0).
	MaxMultiplier float64
}

// DefaultAlphaControl returns the original's defaults: every switch off,
// threshold 0.04, gain 1, multipliers [0.5, 2].
func DefaultAlphaControl() AlphaControl {
	return AlphaControl{Threshold: 0.04, Gain: 1, MinMultiplier: 0.5, MaxMultiplier: 2}
}

// Validate checks the settings and names the first bad one.
func (c AlphaControl) Validate() error {
	bad := func(key string, val float64, why string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrConfig, key, val, why)
	}
	switch {
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return bad("maxent.alpha_kl_threshold", c.Threshold, "must be finite and > 0")
	case !(c.Gain >= 0) || math.IsInf(c.Gain, 0):
		return bad("maxent.alpha_kl_gain", c.Gain, "must be finite and >= 0")
	case !(c.MinMultiplier > 0 && c.MinMultiplier <= 1):
		return bad("maxent.alpha_kl_min_multiplier", c.MinMultiplier, "must be in (0, 1]")
	case !(c.MaxMultiplier >= 1) || math.IsInf(c.MaxMultiplier, 0):
		return bad("maxent.alpha_kl_max_multiplier", c.MaxMultiplier, "must be finite and >= 1")
	}
	return nil
}

// Alpha is the outcome of ResolveAlpha, with the fields the original logs
// (maxent/alpha, alpha_multiplier, alpha_kl_direction, alpha_trust_zone_blocked).
type Alpha struct {
	// Effective is alpha·Multiplier, or 0 when Blocked.
	Effective float64
	// Multiplier is the clamped multiplier m.
	Multiplier float64
	// Direction is +1 (raised), −1 (lowered or blocked) or 0.
	Direction int
	// Blocked reports that DisableOutsideTrustZone set alpha to 0.
	Blocked bool
}

// ResolveAlpha applies the KL-adaptive control to the base alpha given the
// measured KL (this batch's token-mean k3, MeanK3). The order is: trust
// zone block, then raise, then lower, then m clamped to [MinMultiplier,
// MaxMultiplier] (spec §1.9a _resolve_effective_maxent_alpha). With
// alpha <= 0 the control is off, as in the original: multiplier 1,
// direction 0, never blocked.
func ResolveAlpha(c AlphaControl, alpha, kl float64) Alpha {
	if !(alpha > 0) {
		return Alpha{Effective: alpha, Multiplier: 1}
	}
	finite := !math.IsNaN(kl) && !math.IsInf(kl, 0)
	if c.DisableOutsideTrustZone && (!finite || kl > c.Threshold) {
		return Alpha{Effective: 0, Multiplier: 0, Direction: -1, Blocked: true}
	}
	m, dir := 1.0, 0
	if c.RaiseOnLowKL && finite && kl < c.Threshold {
		m, dir = 1+c.Gain*(c.Threshold-kl)/c.Threshold, 1
	}
	if c.LowerOnHighKL {
		switch {
		case !finite:
			m, dir = c.MinMultiplier, -1
		case kl > c.Threshold:
			m, dir = 1/(1+c.Gain*(kl-c.Threshold)/c.Threshold), -1
		}
	}
	m = math.Min(math.Max(m, c.MinMultiplier), c.MaxMultiplier)
	return Alpha{Effective: alpha * m, Multiplier: m, Direction: dir}
}
