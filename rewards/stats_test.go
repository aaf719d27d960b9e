package rewards

import (
	"errors"
	"math"
	"testing"
)

func TestUtilities(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name    string
		perFunc [][]float64
		weights []float64
		want    []float64
		err     error
	}{
		// spec §6 "reward weights applied": u = Σ_j w_j r_ij.
		{name: "weights applied", perFunc: [][]float64{{1, 0}, {0.5, 1}}, weights: []float64{1, 0.1}, want: []float64{1.05, 0.1}},
		// spec §1.2: no weights means 1.0 each.
		{name: "default weights", perFunc: [][]float64{{1, 0}, {0.5, 1}}, want: []float64{1.5, 1}},
		// spec §1.2 nan-sum: NaN (and here ±Inf) count as 0.
		{name: "nan-sum", perFunc: [][]float64{{nan, 2, math.Inf(1)}, {1, nan, 3}}, want: []float64{1, 2, 3}},
		{name: "no functions", perFunc: nil, err: ErrShape},
		{name: "ragged", perFunc: [][]float64{{1, 2}, {1}}, err: ErrShape},
		{name: "weight count", perFunc: [][]float64{{1}}, weights: []float64{1, 2}, err: ErrShape},
		{name: "non-finite weight", perFunc: [][]float64{{1}}, weights: []float64{nan}, err: ErrNonFinite},
	}
	for _, tc := range tests {
		got, err := Utilities(tc.perFunc, tc.weights)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if tc.err == nil && !nearSlice(got, tc.want, 1e-12) {
			t.Errorf("%s: utilities = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestZeroTruncated(t *testing.T) {
	// spec §6 "truncated completions zeroed (finish_reason=length -> 0)".
	u := []float64{1, 0.5, 2}
	got, err := ZeroTruncated(u, []bool{false, true, false})
	if err != nil || !nearSlice(got, []float64{1, 0, 2}, 0) {
		t.Errorf("ZeroTruncated = %v, %v; want [1 0 2]", got, err)
	}
	if u[1] != 0.5 {
		t.Errorf("input modified: %v", u)
	}
	if _, err := ZeroTruncated(u, []bool{true}); !errors.Is(err, ErrShape) {
		t.Errorf("short flags: err = %v, want ErrShape", err)
	}
}

func TestMoments(t *testing.T) {
	tests := []struct {
		name      string
		u         []float64
		mean, std float64
	}{
		// spec §6 "moments on empty/single": 0 std.
		{name: "empty", u: nil, mean: 0, std: 0},
		{name: "single", u: []float64{3}, mean: 3, std: 0},
		// population std (DESIGN §3): [1,3] -> mean 2, std 1 (unbiased would be √2).
		{name: "population", u: []float64{1, 3}, mean: 2, std: 1},
		{name: "nan skipped", u: []float64{1, math.NaN(), 3}, mean: 2, std: 1},
		// sums and squares overflow: the scaled fallback, exact for equal values.
		{name: "equal huge", u: []float64{huge, huge, huge}, mean: huge, std: 0},
		{name: "opposite huge", u: []float64{huge, -huge}, mean: 0, std: huge},
		{name: "huge mean", u: []float64{huge, huge, 0, 0}, mean: huge / 2, std: huge / 2},
	}
	for _, tc := range tests {
		m, s := Moments(tc.u)
		if !near(m, tc.mean, 1e-12*max(1, math.Abs(tc.mean))) || !near(s, tc.std, 1e-12*max(1, tc.std)) {
			t.Errorf("%s: moments = (%v, %v), want (%v, %v)", tc.name, m, s, tc.mean, tc.std)
		}
	}
}

func TestQuantiles(t *testing.T) {
	// spec §3.1: linear interpolation, pos = q·(n-1). For 0..4: p05 = 0.2, p95 = 3.8.
	got := Quantiles([]float64{4, 0, 2, 1, 3})
	want := [7]float64{0, 0.2, 1, 2, 3, 3.8, 4}
	for i := range want {
		if !near(got[i], want[i], 1e-12) {
			t.Errorf("quantile %v = %v, want %v", quantileLevels[i], got[i], want[i])
		}
	}
	if got := Quantiles(nil); got != [7]float64{} {
		t.Errorf("empty quantiles = %v, want zeros", got)
	}
	if got := Quantiles([]float64{5}); got != [7]float64{5, 5, 5, 5, 5, 5, 5} {
		t.Errorf("single quantiles = %v, want all 5", got)
	}
	// x[hi] - x[lo] overflows: p00 was -huge + 0·Inf = NaN.
	got = Quantiles([]float64{huge, -huge})
	want = [7]float64{-huge, -0.9 * huge, -0.5 * huge, 0, 0.5 * huge, 0.9 * huge, huge}
	for i := range want {
		if !near(got[i], want[i], 1e-12*huge) {
			t.Errorf("huge quantile %v = %v, want %v", quantileLevels[i], got[i], want[i])
		}
	}
}
