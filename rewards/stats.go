package rewards

import (
	"fmt"
	"math"
	"slices"
)

// groupCount checks that n values split into groups of k and returns the
// number of groups P = n/k.
func groupCount(n, k int) (int, error) {
	if k < 1 {
		return 0, fmt.Errorf("group size K=%d: %w", k, ErrEmptyGroup)
	}
	if n%k != 0 {
		return 0, fmt.Errorf("%d values do not split into groups of K=%d: %w", n, k, ErrShape)
	}
	return n / k, nil
}

// checkLen returns ErrShape when a slice that must match the batch does not.
func checkLen(name string, got, want int) error {
	if got != want {
		return fmt.Errorf("len(%s)=%d, want %d: %w", name, got, want, ErrShape)
	}
	return nil
}

// checkFinite returns ErrNonFinite naming the first non-finite entry.
func checkFinite(name string, x []float64) error {
	for i, v := range x {
		if !isFinite(v) {
			return fmt.Errorf("%s[%d]=%v: %w", name, i, v, ErrNonFinite)
		}
	}
	return nil
}

// isFinite reports whether v is neither NaN nor ±Inf (v - v is NaN for both).
func isFinite(v float64) bool { return v-v == 0 }

// Utilities returns the total utility of every completion, the weighted sum of
// its per-function rewards with non-finite rewards counted as zero (spec §1.2):
//
//	u_i = Σ_j w_j · r_ij      (NaN and ±Inf r_ij contribute 0)
//
// perFunc is [F][P*K]; weights has length F, or 0 for weight 1 each. Weights
// must be finite. The original's TRL path treats only NaN as missing; counting
// ±Inf as missing too keeps every utility finite; a weighted sum beyond
// float64 returns ErrNonFinite.
func Utilities(perFunc [][]float64, weights []float64) ([]float64, error) {
	if len(perFunc) == 0 {
		return nil, fmt.Errorf("utilities: no reward functions: %w", ErrShape)
	}
	if len(weights) != 0 && len(weights) != len(perFunc) {
		return nil, fmt.Errorf("utilities: %d weights for %d reward functions: %w", len(weights), len(perFunc), ErrShape)
	}
	if err := checkFinite("reward weights", weights); err != nil {
		return nil, fmt.Errorf("utilities: %w", err)
	}
	n := len(perFunc[0])
	u := make([]float64, n)
	for j, r := range perFunc {
		if err := checkLen(fmt.Sprintf("rewards[%d]", j), len(r), n); err != nil {
			return nil, fmt.Errorf("utilities: %w", err)
		}
		w := 1.0
		if len(weights) != 0 {
			w = weights[j]
		}
		for i, v := range r {
			if isFinite(v) {
				u[i] += w * v
			}
		}
	}
	for i, v := range u {
		if !isFinite(v) {
			return nil, fmt.Errorf("utilities: completion %d: weighted reward sum is %v (beyond float64): %w", i, v, ErrNonFinite)
		}
	}
	return u, nil
}

// ZeroTruncated returns a copy of u with the utilities of truncated
// completions set to 0 (spec §1.2 zero_truncated_completion_rewards).
func ZeroTruncated(u []float64, truncated []bool) ([]float64, error) {
	if err := checkLen("truncated", len(truncated), len(u)); err != nil {
		return nil, fmt.Errorf("zero truncated: %w", err)
	}
	out := slices.Clone(u)
	for i, t := range truncated {
		if t {
			out[i] = 0
		}
	}
	return out, nil
}

// Moments returns the mean and the population standard deviation of the
// finite values of u (spec §1.2 reward_moments, the logged reward/reward_std):
//
//	mean = Σ u / N,   std = sqrt(Σ (u - mean)² / N)
//
// Fallback: (0, 0) when no value is finite; std 0 when N = 1.
func Moments(u []float64) (mean, std float64) {
	return meanFinite(u), stdPop(u)
}

// meanFinite is the mean over the finite entries of x (0 if none).
func meanFinite(x []float64) float64 {
	s, n := 0.0, 0
	for _, v := range x {
		if isFinite(v) {
			s += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	if !isFinite(s) {
		return meanScaled(x)
	}
	return s / float64(n)
}

// meanScaled is the mean of the finite entries of x (at least one) computed
// without overflow, for when the plain sum overflows: a running mean of
// x·2^-e, with 2^e > max |x|, scaled back. Equal values give their value
// exactly.
func meanScaled(x []float64) float64 {
	e := maxExponent(x)
	m, n := 0.0, 0
	for _, v := range x {
		if isFinite(v) {
			n++
			m += (math.Ldexp(v, -e) - m) / float64(n)
		}
	}
	return math.Ldexp(m, e)
}

// maxExponent returns the smallest e >= 0 with |v| < 2^e for every finite
// entry v of x.
func maxExponent(x []float64) int {
	e := 0
	for _, v := range x {
		if isFinite(v) {
			_, ev := math.Frexp(v)
			e = max(e, ev)
		}
	}
	return e
}

// maxAbs returns the largest |v| over the finite entries of x (0 if none).
func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		if isFinite(v) {
			m = max(m, math.Abs(v))
		}
	}
	return m
}

// stdScaled returns sqrt(Σ (x - mean)² / div) over the finite entries of x
// as std·2^e: it is computed on x·2^-e, with 2^e > max |x| >= |mean|, so
// neither the differences nor their squares overflow.
func stdScaled(x []float64, mean, div float64) (std float64, e int) {
	e = maxExponent(x)
	sm := math.Ldexp(mean, -e)
	s := 0.0
	for _, v := range x {
		if isFinite(v) {
			d := math.Ldexp(v, -e) - sm
			s += d * d
		}
	}
	return math.Sqrt(s / div), e
}

// stdPop is the population standard deviation over the finite entries of x:
//
//	sqrt(Σ (x - mean)² / N)     (0 when N <= 1)
func stdPop(x []float64) float64 {
	m := meanFinite(x)
	s, n := 0.0, 0
	for _, v := range x {
		if isFinite(v) {
			s += (v - m) * (v - m)
			n++
		}
	}
	if n <= 1 {
		return 0
	}
	if !isFinite(s) {
		sd, e := stdScaled(x, m, float64(n)) // <= half the range: finite
		return math.Ldexp(sd, e)
	}
	return math.Sqrt(s / float64(n))
}

// stdUnbiased is the sample standard deviation of x (all entries finite):
//
//	sqrt(Σ (x - mean)² / (N - 1))   (0 when N <= 1)
func stdUnbiased(x []float64, mean float64) float64 {
	if len(x) <= 1 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += (v - mean) * (v - mean)
	}
	return math.Sqrt(s / float64(len(x)-1))
}

// quantileLevels are the levels of the logged reward quantiles
// reward_p00, p05, p25, p50, p75, p95, p100 (spec §3.1).
var quantileLevels = [7]float64{0, 0.05, 0.25, 0.5, 0.75, 0.95, 1}

// quantileNames are the key suffixes of quantileLevels.
var quantileNames = [7]string{"p00", "p05", "p25", "p50", "p75", "p95", "p100"}

// Quantiles returns the linearly interpolated quantiles of the finite values
// of x at the levels 0, .05, .25, .5, .75, .95, 1 (spec §3.1 _quantile_stats):
//
//	pos = q·(n-1),  Q = x[⌊pos⌋] + (pos-⌊pos⌋)·(x[⌊pos⌋+1] - x[⌊pos⌋])   (x sorted)
//
// Fallback: all zeros when no value is finite.
func Quantiles(x []float64) [7]float64 {
	var out [7]float64
	s := make([]float64, 0, len(x))
	for _, v := range x {
		if isFinite(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return out
	}
	slices.Sort(s)
	for i, q := range quantileLevels {
		pos := q * float64(len(s)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(s)-1)
		f := pos - float64(lo)
		out[i] = s[lo] + f*(s[hi]-s[lo])
		if !isFinite(out[i]) { // s[hi]-s[lo] overflowed
			out[i] = s[lo]*(1-f) + s[hi]*f
		}
	}
	return out
}

// Summary is the mean, population std and quantiles of a set of values.
type Summary struct {
	// Mean is the mean of the finite values (0 if none).
	Mean float64
	// Std is the population standard deviation of the finite values.
	Std float64
	// Quantiles are p00, p05, p25, p50, p75, p95 and p100.
	Quantiles [7]float64
}

// Summarize returns the Summary of the finite values of x.
func Summarize(x []float64) Summary {
	m, s := Moments(x)
	return Summary{Mean: m, Std: s, Quantiles: Quantiles(x)}
}
