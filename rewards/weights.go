package rewards

import (
	"fmt"
	"math"
)

// WeightDenominator selects the temperature D of the listwise weights
// (DESIGN §3, spec §8 quirk 1).
type WeightDenominator int

const (
	// WeightDenominatorTau is D = τ, what the original trainer and its tests
	// use. It is the default (the zero value).
	WeightDenominatorTau WeightDenominator = iota
	// WeightDenominatorTauPlusBeta is D = τ + β, the paper form
	// (config maxent.weight_denominator: tau_plus_beta).
	WeightDenominatorTauPlusBeta
)

// String returns the config spelling: "tau" or "tau_plus_beta".
func (d WeightDenominator) String() string {
	if d == WeightDenominatorTauPlusBeta {
		return "tau_plus_beta"
	}
	return "tau"
}

// DenominatorFloor is the smallest weight temperature used (spec §1.8).
const DenominatorFloor = 1e-8

// Value returns the weight temperature for the given tau and beta:
//
//	D = max(τ, 1e-8)   or   D = max(τ + β, 1e-8)
func (d WeightDenominator) Value(tau, beta float64) float64 {
	if d == WeightDenominatorTauPlusBeta {
		tau += beta
	}
	return max(tau, DenominatorFloor)
}

// ListwiseWeightsTo writes the listwise MaxEnt weights of one group into dst
// and returns it (spec §1.8 weight_vector_from_q):
//
//	log w_i = (log max(q_i, 1e-12) + β · ref_i) / D;   w = softmax(log w)
//	i.e.  w_i ∝ q_i^(1/D) · π_ref(y_i)^(β/D)
//
// q is the group's target (already tempered, DESIGN §3), refLogp its reference
// sequence log-probs (nil, or ignored when β = 0), d > 0 the temperature from
// WeightDenominator.Value. dst is reused when its capacity suffices (nil is
// fine); it may alias q. Non-finite or negative q, non-finite refLogp with
// β ≠ 0, or d not > 0 return an error and leave dst unspecified.
func ListwiseWeightsTo(dst, q, refLogp []float64, d, beta float64) ([]float64, error) {
	if len(q) == 0 {
		return nil, fmt.Errorf("listwise weights: %w", ErrEmptyGroup)
	}
	if !(d > 0) || math.IsInf(d, 0) {
		return nil, fmt.Errorf("listwise weights: denominator %v must be finite and > 0: %w", d, ErrParam)
	}
	if !isFinite(beta) {
		return nil, fmt.Errorf("listwise weights: beta %v: %w", beta, ErrNonFinite)
	}
	useRef := beta != 0 && refLogp != nil
	if useRef {
		if err := checkLen("refLogp", len(refLogp), len(q)); err != nil {
			return nil, fmt.Errorf("listwise weights: %w", err)
		}
		if err := checkFinite("refLogp", refLogp); err != nil {
			return nil, fmt.Errorf("listwise weights: %w", err)
		}
	}
	for i, v := range q {
		if !isFinite(v) || v < 0 {
			return nil, fmt.Errorf("listwise weights: q[%d]=%v must be finite and >= 0: %w", i, v, ErrNonFinite)
		}
	}
	dst = resize(dst, len(q))
	for i, v := range q {
		l := math.Log(max(v, 1e-12))
		if useRef {
			l += beta * refLogp[i]
		}
		dst[i] = l / d
	}
	softmaxInPlace(dst)
	return dst, nil
}

// resize returns dst with length n, reusing its storage when possible.
func resize(dst []float64, n int) []float64 {
	if cap(dst) < n {
		return make([]float64, n)
	}
	return dst[:n]
}

// RenormalizeByTokensTo writes w_i·max(T_i,1) renormalised over the group into
// dst (spec §1.8 normalize_by_tokens; off in every live path of the original).
func RenormalizeByTokensTo(dst, w []float64, tokenCounts []int) ([]float64, error) {
	if err := checkLen("token counts", len(tokenCounts), len(w)); err != nil {
		return nil, fmt.Errorf("token renormalisation: %w", err)
	}
	dst = resize(dst, len(w))
	s := 0.0
	for i, v := range w {
		dst[i] = v * float64(max(tokenCounts[i], 1))
		s += dst[i]
	}
	s = max(s, 1e-12)
	for i := range dst {
		dst[i] /= s
	}
	return dst, nil
}

// UniformTo fills dst with 1/K, the documented fallback for neutral groups
// and for maxent_allow_empty_weight_fallback (spec §1.8, §1.9b).
func UniformTo(dst []float64, k int) []float64 {
	dst = resize(dst, k)
	for i := range dst {
		dst[i] = 1 / float64(k)
	}
	return dst
}

// WeightOptions are the settings of the listwise weights beyond tau and beta.
type WeightOptions struct {
	// Denominator selects D = τ (default) or τ + β.
	Denominator WeightDenominator
	// NormalizeByTokens multiplies weights by max(T_i,1) and renormalises
	// (default false, as in every live path of the original).
	NormalizeByTokens bool
}

// ListwiseWeights returns the [P×K] weight matrix (group-major [P*K]) of the
// whole batch, row g equal to ListwiseWeightsTo on group g (spec §1.8
// weight_matrix_from_q). refLogp is nil or [P*K]; tokenCounts is needed only
// with NormalizeByTokens.
func ListwiseWeights(q, refLogp []float64, tokenCounts []int, k int, tau, beta float64, opt WeightOptions) ([]float64, error) {
	p, err := groupCount(len(q), k)
	if err != nil {
		return nil, fmt.Errorf("weight matrix: %w", err)
	}
	if refLogp != nil {
		if err := checkLen("refLogp", len(refLogp), len(q)); err != nil {
			return nil, fmt.Errorf("weight matrix: %w", err)
		}
	}
	if opt.NormalizeByTokens {
		if err := checkLen("token counts", len(tokenCounts), len(q)); err != nil {
			return nil, fmt.Errorf("weight matrix: %w", err)
		}
	}
	if !isFinite(tau) {
		return nil, fmt.Errorf("weight matrix: tau %v: %w", tau, ErrNonFinite)
	}
	d := opt.Denominator.Value(tau, beta)
	w := make([]float64, len(q))
	for g := range p {
		lo, hi := g*k, (g+1)*k
		var ref []float64
		if refLogp != nil {
			ref = refLogp[lo:hi]
		}
		if _, err := ListwiseWeightsTo(w[lo:hi], q[lo:hi], ref, d, beta); err != nil {
			return nil, fmt.Errorf("weight matrix group %d: %w", g, err)
		}
		if opt.NormalizeByTokens {
			if _, err := RenormalizeByTokensTo(w[lo:hi], w[lo:hi], tokenCounts[lo:hi]); err != nil {
				return nil, fmt.Errorf("weight matrix group %d: %w", g, err)
			}
		}
	}
	return w, nil
}

// NeutralGroups reports the groups whose q is flat (max - min <= 1e-8); the
// listwise loss may skip them (spec §1.9b maxent_listwise_skip_zero_variance_groups).
func NeutralGroups(q []float64, k int) ([]bool, error) {
	p, err := groupCount(len(q), k)
	if err != nil {
		return nil, fmt.Errorf("neutral groups: %w", err)
	}
	out := make([]bool, p)
	for g := range p {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range q[g*k : (g+1)*k] {
			lo, hi = min(lo, v), max(hi, v)
		}
		out[g] = hi-lo <= 1e-8
	}
	return out, nil
}

// WeightEntropyStats summarise the entropy of the listwise weights of a batch
// (spec §1.8 collect_weight_entropy, §3.1 weights block).
type WeightEntropyStats struct {
	// Mean, Min and Max of the per-group entropy H_g = -Σ w log max(w,1e-12).
	Mean, Min, Max float64
	// NormMean is the mean of H_g / ln K (0 when K = 1).
	NormMean float64
	// AdvantageEntropyMean and AdvantageEntropyStd are the mean and
	// population std of the samples w_i - 1/K.
	AdvantageEntropyMean, AdvantageEntropyStd float64
}

// WeightEntropy returns the weight-entropy statistics of a [P*K] weight
// matrix. An empty matrix gives zero statistics.
func WeightEntropy(w []float64, k int) (WeightEntropyStats, error) {
	h, err := GroupEntropies(w, k)
	if err != nil {
		return WeightEntropyStats{}, fmt.Errorf("weight entropy: %w", err)
	}
	var st WeightEntropyStats
	if len(h) == 0 {
		return st, nil
	}
	st.Min, st.Max = math.Inf(1), math.Inf(-1)
	for _, v := range h {
		st.Mean += v
		st.Min, st.Max = min(st.Min, v), max(st.Max, v)
		if k > 1 {
			st.NormMean += v / math.Log(float64(k))
		}
	}
	st.Mean /= float64(len(h))
	st.NormMean /= float64(len(h))
	adv := make([]float64, len(w))
	for i, v := range w {
		adv[i] = v - 1/float64(k)
	}
	st.AdvantageEntropyMean, st.AdvantageEntropyStd = Moments(adv)
	return st, nil
}
