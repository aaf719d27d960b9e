package rewards

import (
	"fmt"
	"math"
	"slices"
)

// AdvantageStdEpsilon is added to the group std before dividing (spec §1.4).
const AdvantageStdEpsilon = 1e-4

// QTemperatureFloor is the smallest q temperature used (spec §1.3).
const QTemperatureFloor = 1e-8

// ZeroStdTolerance is how far from its group mean a utility may be for the
// group to count as zero-variance (spec §3.1 frac_reward_zero_std uses
// |A| < 1e-8).
const ZeroStdTolerance = 1e-8

// QDistribution returns the listwise target q of every group, a tempered
// softmax of the raw utilities with an epsilon floor (spec §1.3, TRL form):
//
//	p = softmax((u - max u) / max(T_q, 1e-8))
//	ε' = min(ε, 1/K - 1e-8);  q = (p·(1 - ε'K) + ε') / Σ(...)
//
// u is group-major [P*K]. epsilon must be >= 0 (0 disables the floor) and
// temperature > 0. The temperature is applied here once and never again
// (DESIGN §3). Non-finite utilities return ErrNonFinite. Where u/T overflows,
// the group's logits are formed as (u - max u)/T instead, the same softmax.
func QDistribution(u []float64, k int, temperature, epsilon float64) ([]float64, error) {
	p, err := groupCount(len(u), k)
	if err != nil {
		return nil, fmt.Errorf("q distribution: %w", err)
	}
	if !(temperature > 0) || math.IsInf(temperature, 0) {
		return nil, fmt.Errorf("q distribution: temperature %v must be finite and > 0: %w", temperature, ErrParam)
	}
	if !(epsilon >= 0) || math.IsInf(epsilon, 0) {
		return nil, fmt.Errorf("q distribution: epsilon %v must be finite and >= 0: %w", epsilon, ErrParam)
	}
	if err := checkFinite("utilities", u); err != nil {
		return nil, fmt.Errorf("q distribution: %w", err)
	}
	t := max(temperature, QTemperatureFloor)
	eps := min(epsilon, 1/float64(k)-1e-8)
	q := make([]float64, len(u))
	for g := range p {
		row := q[g*k : (g+1)*k]
		logitsTo(row, u[g*k:(g+1)*k], t)
		softmaxInPlace(row)
		if eps > 0 {
			s := 0.0
			for j := range row {
				row[j] = row[j]*(1-eps*float64(k)) + eps
				s += row[j]
			}
			s = max(s, 1e-12)
			for j := range row {
				row[j] /= s
			}
		}
	}
	return q, nil
}

// logitsTo writes u/t into dst. If a quotient overflows, it writes
// (u - max u)/t instead: the same softmax, with logits <= 0 and a maximum of 0,
// so the softmax has no Inf - Inf.
func logitsTo(dst, u []float64, t float64) {
	ok := true
	for j, v := range u {
		dst[j] = v / t
		ok = ok && isFinite(dst[j])
	}
	if ok {
		return
	}
	m := slices.Max(u)
	for j, v := range u {
		dst[j] = (v - m) / t
	}
}

// softmaxInPlace replaces finite logits x by softmax(x), stably.
func softmaxInPlace(x []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	s := 0.0
	for i, v := range x {
		x[i] = math.Exp(v - m)
		s += x[i]
	}
	for i := range x {
		x[i] /= s
	}
}

// GroupAdvantages returns the group-relative advantage of every completion
// (spec §1.4, TRL/Dr.GRPO):
//
//	A_i = (u_i - mean_g) / (stdUnbiased_g + 1e-4)   if scaleRewards
//	A_i =  u_i - mean_g                             otherwise
//
// The std is the unbiased (n-1) one and is 0 for K = 1 (DESIGN §3). Sums
// that overflow float64 are redone on utilities scaled by a power of two, so
// equal utilities always give 0; an advantage that is itself beyond float64
// (u_i - mean_g, unscaled) returns ErrNonFinite.
func GroupAdvantages(u []float64, k int, scaleRewards bool) ([]float64, error) {
	p, err := groupCount(len(u), k)
	if err != nil {
		return nil, fmt.Errorf("group advantages: %w", err)
	}
	if err := checkFinite("utilities", u); err != nil {
		return nil, fmt.Errorf("group advantages: %w", err)
	}
	a := make([]float64, len(u))
	for g := range p {
		row, dst := u[g*k:(g+1)*k], a[g*k:(g+1)*k]
		advantagesTo(dst, row, scaleRewards)
		if checkFinite("advantages", dst) != nil {
			return nil, fmt.Errorf("group advantages: group %d: non-finite advantage from utilities of magnitude %g: %w",
				g, maxAbs(row), ErrNonFinite)
		}
	}
	return a, nil
}

// advantagesTo writes the advantages of one group of finite utilities into
// dst. When the std overflows, it is computed on the scaled utilities, where
// the advantage (u - mean)/(std + ε) is the same up to rounding.
func advantagesTo(dst, row []float64, scaleRewards bool) {
	b := meanFinite(row)
	std := 0.0
	if scaleRewards {
		std = stdUnbiased(row, b)
	}
	if !isFinite(std) {
		sd, e := stdScaled(row, b, float64(len(row)-1)) // sd·2^e may exceed float64
		sm, eps := math.Ldexp(b, -e), math.Ldexp(AdvantageStdEpsilon, -e)
		for j, v := range row {
			dst[j] = (math.Ldexp(v, -e) - sm) / (sd + eps)
		}
		return
	}
	for j, v := range row {
		dst[j] = v - b
		if scaleRewards {
			dst[j] /= std + AdvantageStdEpsilon
		}
	}
}

// ZeroVarianceGroups reports, per group, whether all its utilities are equal
// (within ZeroStdTolerance of the group mean). These are the groups DAPO's
// dynamic sampling drops and frac_reward_zero_std counts (spec §3.1).
// Non-finite utilities return ErrNonFinite.
func ZeroVarianceGroups(u []float64, k int) ([]bool, error) {
	p, err := groupCount(len(u), k)
	if err != nil {
		return nil, fmt.Errorf("zero-variance groups: %w", err)
	}
	if err := checkFinite("utilities", u); err != nil {
		return nil, fmt.Errorf("zero-variance groups: %w", err)
	}
	out := make([]bool, p)
	for g := range p {
		row := u[g*k : (g+1)*k]
		b := meanFinite(row)
		out[g] = true
		for _, v := range row {
			if math.Abs(v-b) >= ZeroStdTolerance {
				out[g] = false
				break
			}
		}
	}
	return out, nil
}

// FractionTrue returns the fraction of true entries (0 for an empty slice),
// e.g. frac_reward_zero_std from ZeroVarianceGroups.
func FractionTrue(b []bool) float64 {
	if len(b) == 0 {
		return 0
	}
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return float64(n) / float64(len(b))
}

// ScaleGroups returns a copy of a with every entry of group g multiplied by
// scales[g]; a non-finite scale counts as 1 (spec §1.5 _apply_group_scales).
func ScaleGroups(a []float64, k int, scales []float64) ([]float64, error) {
	p, err := groupCount(len(a), k)
	if err != nil {
		return nil, fmt.Errorf("scale groups: %w", err)
	}
	if err := checkLen("scales", len(scales), p); err != nil {
		return nil, fmt.Errorf("scale groups: %w", err)
	}
	out := make([]float64, len(a))
	for i, v := range a {
		s := scales[i/k]
		if !isFinite(s) {
			s = 1
		}
		out[i] = v * s
	}
	return out, nil
}

// GroupEntropies returns the entropy of every group's distribution
// (spec §1.8 collect_weight_entropy, §3.1 q_entropy):
//
//	H_g = -Σ_i w_i · log max(w_i, 1e-12)
func GroupEntropies(w []float64, k int) ([]float64, error) {
	p, err := groupCount(len(w), k)
	if err != nil {
		return nil, fmt.Errorf("group entropies: %w", err)
	}
	if err := checkFinite("distribution", w); err != nil {
		return nil, fmt.Errorf("group entropies: %w", err)
	}
	h := make([]float64, p)
	for g := range p {
		for _, v := range w[g*k : (g+1)*k] {
			h[g] -= v * math.Log(max(v, 1e-12))
		}
	}
	return h, nil
}
