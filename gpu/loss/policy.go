package loss

import (
	"fmt"
	"math"
)

// Policy evaluates the policy loss chosen by cfg.Policy: GRPO (vanilla),
// GSPO or CISPO. DEntropy is nil.
func Policy(cfg Config, b Batch, lp []float64) (Result, error) {
	switch cfg.Policy {
	case PolicyGSPO:
		return GSPO(cfg, b, lp)
	case PolicyCISPO:
		return CISPO(cfg, b, lp)
	default:
		return GRPO(cfg, b, lp)
	}
}

// GRPO is the token-level clipped surrogate with an optional k3 KL penalty
// (spec §1.9a), aggregated by cfg.Type:
//
//	r_t   = exp(clamp(lp − old, ±5))          (then min(r, Delta) if Delta > 0)
//	L_t   = −c_t · min(r·A, clamp(r, 1−ε, 1+ε_high)·A) + β·k3_t
//	k3_t  = exp(d) − d − 1,  d = clamp(ref − lp, ±5)
//	c_t   = min(exp(old − behaviour), C), detached  (1 without BehaviourLogp or C)
func GRPO(cfg Config, b Batch, lp []float64) (Result, error) {
	return tokenLoss(cfg, b, lp, vanillaToken)
}

// CISPO is the clipped-IS-weight policy loss: the clipped ratio is
// detached and multiplies lp, with no min (unconditional clip):
//
//	L_t = −c_t · sg(clamp(r, 1−ε, 1+ε_high)) · A · lp + β·k3_t
//
// aggregated by cfg.Type; r, c_t and k3 as in GRPO (Delta unused).
func CISPO(cfg Config, b Batch, lp []float64) (Result, error) {
	return tokenLoss(cfg, b, lp, cispoToken)
}

// tokenTerm is one token's policy term: value, d value/d lp, ratio and
// whether the clip acted at the bottom or top.
type tokenTerm func(cfg Config, lp, old, adv float64) (v, d, r float64, low, high bool)

// ratio returns exp(clamp(lp − old, ±5)) and its derivative wrt lp.
func ratio(lp, old float64) (float64, float64) {
	lr, g := clampGrad(lp-old, -LogRatioClamp, LogRatioClamp)
	r := math.Exp(lr)
	return r, r * g
}

func vanillaToken(cfg Config, lp, old, adv float64) (v, d, r float64, low, high bool) {
	r, dr := ratio(lp, old)
	if cfg.Delta > 0 && r > cfg.Delta {
		r, dr = cfg.Delta, 0
	}
	epsLow, epsHigh := cfg.Epsilon, cfg.epsHigh()
	rc, g := clampGrad(r, 1-epsLow, 1+epsHigh)
	m, da, db := minGrad(r*adv, rc*adv)
	low = r < 1-epsLow && adv < 0
	high = r > 1+epsHigh && adv > 0
	return -m, -adv * (da*dr + db*g*dr), r, low, high
}

func cispoToken(cfg Config, lp, old, adv float64) (v, d, r float64, low, high bool) {
	r, _ = ratio(lp, old)
	epsLow, epsHigh := cfg.Epsilon, cfg.epsHigh()
	w, _ := clampGrad(r, 1-epsLow, 1+epsHigh) // detached
	return -w * adv * lp, -w * adv, r, r < 1-epsLow, r > 1+epsHigh
}

// tokenLoss evaluates a token-level policy term plus the KL penalty and
// aggregates by cfg.Type.
func tokenLoss(cfg Config, b Batch, lp []float64, term tokenTerm) (Result, error) {
	if err := checkPolicy(cfg, b, lp); err != nil {
		return Result{}, err
	}
	coef, _ := tokenCoef(cfg, b)
	res := Result{DLogp: make([]float64, b.N*b.T)}
	st := &res.Stats
	useIS := b.BehaviourLogp != nil && cfg.ISTruncation > 0
	var isSum, isCapped float64
	for k, m := range b.Mask {
		if m == 0 {
			continue
		}
		i := k / b.T
		old := b.old(lp, k)
		v, d, r, low, high := term(cfg, lp[k], old, b.Advantages[i])
		c := 1.0
		if useIS {
			var capped bool
			c, capped = isWeight(old-b.BehaviourLogp[k], cfg.ISTruncation)
			isCapped += m * b2f(capped)
		}
		isSum += m * c
		st.PolicyLoss += coef[k] * c * v
		res.DLogp[k] = coef[k] * c * d
		if cfg.Beta != 0 {
			kv, kd := k3(b.RefLogp[k], lp[k])
			st.KLLoss += coef[k] * cfg.Beta * kv
			res.DLogp[k] += coef[k] * cfg.Beta * kd
		}
		st.Tokens += m
		st.RatioMean += m * r
		st.ClipLow += m * b2f(low)
		st.ClipHigh += m * b2f(high)
	}
	tok := math.Max(st.Tokens, 1)
	st.RatioMean /= tok
	st.ClipLow /= tok
	st.ClipHigh /= tok
	st.ClipRegion = st.ClipLow + st.ClipHigh
	st.ISWeightMean = isSum / tok
	st.ISTruncatedFrac = isCapped / tok
	if st.Tokens == 0 {
		st.ISWeightMean = 1
	}
	st.KL = meanK3(b, lp)
	res.Loss = st.PolicyLoss + st.KLLoss
	return res, nil
}

// checkPolicy validates what every policy loss needs.
func checkPolicy(cfg Config, b Batch, lp []float64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := b.check(lp); err != nil {
		return err
	}
	if err := b.checkAdvantages(); err != nil {
		return err
	}
	if cfg.Beta != 0 && b.RefLogp == nil {
		return fmt.Errorf("%w: loss.beta = %v needs RefLogp", ErrShape, cfg.Beta)
	}
	return nil
}

// b2f is 1 for true, 0 for false.
func b2f(x bool) float64 {
	if x {
		return 1
	}
	return 0
}

// GSPO is the sequence-level clipped surrogate (Zheng et al. 2025). For
// each sequence i with n_i = Σ_t m_it > 0 completion tokens:
//
//	s_i = exp(clamp( Σ_t m(lp − old) / n_i , ±5))      (geometric-mean ratio)
//	L_i = −c_i · min(s_i·A_i, clamp(s_i, 1−ε, 1+ε_high)·A_i) + β · Σ_t m·k3_t / n_i
//	c_i = min(exp(Σ_t m(old − behaviour) / n_i), C), detached
//	loss = Σ_i L_i / (number of sequences with n_i > 0)
//
// i.e. the mean over sequences whatever cfg.Type says (GSPO's objective is
// a sequence average). ∂s_i/∂lp_t = s_i·m_t/n_i, so every token of a
// sequence gets the same gradient. Clip and ratio stats are per sequence.
func GSPO(cfg Config, b Batch, lp []float64) (Result, error) {
	if err := checkPolicy(cfg, b, lp); err != nil {
		return Result{}, err
	}
	n, total := b.seqTokens()
	active := 0
	for _, ni := range n {
		if ni > 0 {
			active++
		}
	}
	res := Result{DLogp: make([]float64, b.N*b.T)}
	st := &res.Stats
	st.Tokens = total
	useIS := b.BehaviourLogp != nil && cfg.ISTruncation > 0
	epsLow, epsHigh := cfg.Epsilon, cfg.epsHigh()
	inv := 1 / math.Max(float64(active), 1)
	var isSum, isCapped float64
	for i := range b.N {
		if n[i] == 0 {
			continue
		}
		logRatio, behRatio := b.seqLogRatios(lp, i, useIS)
		s, ds := ratio(logRatio/n[i], 0)
		sc, g := clampGrad(s, 1-epsLow, 1+epsHigh)
		adv := b.Advantages[i]
		mv, da, db := minGrad(s*adv, sc*adv)
		c := 1.0
		if useIS {
			var capped bool
			c, capped = isWeight(behRatio/n[i], cfg.ISTruncation)
			isCapped += b2f(capped)
		}
		isSum += c
		st.PolicyLoss += inv * c * -mv
		dSeq := inv * c * -adv * (da*ds + db*g*ds) / n[i] // per unit token mask
		klSum := b.spreadSeqGrad(res.DLogp, lp, i, dSeq, inv*cfg.Beta, n[i], cfg.Beta != 0)
		st.KLLoss += inv * cfg.Beta * klSum / n[i]
		st.RatioMean += s
		st.ClipLow += b2f(s < 1-epsLow && adv < 0)
		st.ClipHigh += b2f(s > 1+epsHigh && adv > 0)
	}
	st.RatioMean *= inv
	st.ClipLow *= inv
	st.ClipHigh *= inv
	st.ClipRegion = st.ClipLow + st.ClipHigh
	st.ISWeightMean = isSum * inv
	st.ISTruncatedFrac = isCapped * inv
	if active == 0 {
		st.ISWeightMean = 1
	}
	st.KL = meanK3(b, lp)
	res.Loss = st.PolicyLoss + st.KLLoss
	return res, nil
}

// seqLogRatios returns sequence i's masked sums Σ_t m(lp − old) and, when
// useIS, Σ_t m(old − behaviour).
func (b Batch) seqLogRatios(lp []float64, i int, useIS bool) (logRatio, behRatio float64) {
	for t, m := range b.Mask[i*b.T : (i+1)*b.T] {
		if m == 0 {
			continue
		}
		k := i*b.T + t
		old := b.old(lp, k)
		logRatio += m * (lp[k] - old)
		if useIS {
			behRatio += m * (old - b.BehaviourLogp[k])
		}
	}
	return logRatio, behRatio
}

// spreadSeqGrad sets sequence i's token gradients in d: dSeq·m for the
// surrogate, plus klScale·m·∂k3/∂lp / n when withKL, and returns
// Σ_t m·k3_t (0 without KL).
func (b Batch) spreadSeqGrad(d, lp []float64, i int, dSeq, klScale, n float64, withKL bool) (klSum float64) {
	for t, m := range b.Mask[i*b.T : (i+1)*b.T] {
		if m == 0 {
			continue
		}
		k := i*b.T + t
		d[k] = dSeq * m
		if withKL {
			kv, kd := k3(b.RefLogp[k], lp[k])
			klSum += m * kv
			d[k] += klScale * kd * m / n
		}
	}
	return klSum
}
