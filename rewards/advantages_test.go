package rewards

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestQDistribution(t *testing.T) {
	tests := []struct {
		name   string
		u      []float64
		k      int
		temp   float64
		eps    float64
		want   []float64
		errIs  error
		source string
	}{
		{name: "softmax, no floor", u: []float64{1, 0}, k: 2, temp: 1, eps: 0,
			want: softmaxRef([]float64{1, 0}), source: "spec §1.3 q = softmax(r/T_q)"},
		{name: "temperature applied once", u: []float64{1, 0, 0, 1}, k: 2, temp: 2, eps: 0,
			want:   append(softmaxRef([]float64{0.5, 0}), softmaxRef([]float64{0, 0.5})...),
			source: "spec §6 listwise q targets = per-group softmax with temperature applied once"},
		{name: "epsilon floor", u: []float64{100, 0}, k: 2, temp: 1, eps: 0.1,
			want:   []float64{1*(1-0.2) + 0.1, 0.1},
			source: "spec §1.3 q = p(1-εK)+ε, p ≈ [1, 0]"},
		{name: "epsilon capped at 1/K-1e-8", u: []float64{5, 0}, k: 2, temp: 1, eps: 0.9,
			want:   []float64{0.5, 0.5},
			source: "spec §1.3 ε' = min(ε, 1/K - 1e-8) makes q ≈ uniform"},
		{name: "K=1", u: []float64{3, -2}, k: 1, temp: 1, eps: 1e-6, want: []float64{1, 1},
			source: "one completion per group: q = 1"},
		{name: "empty batch", u: nil, k: 4, temp: 1, eps: 1e-6, want: []float64{},
			source: "spec §6 q for empty groups: no groups, nothing returned"},
		{name: "K=0", u: []float64{1}, k: 0, temp: 1, errIs: ErrEmptyGroup},
		{name: "ragged", u: []float64{1, 2, 3}, k: 2, temp: 1, errIs: ErrShape},
		{name: "NaN utility", u: []float64{math.NaN(), 1}, k: 2, temp: 1, errIs: ErrNonFinite},
		{name: "zero temperature", u: []float64{1, 2}, k: 2, temp: 0, errIs: ErrParam},
		{name: "negative epsilon", u: []float64{1, 2}, k: 2, temp: 1, eps: -1, errIs: ErrParam},
	}
	for _, tc := range tests {
		got, err := QDistribution(tc.u, tc.k, tc.temp, tc.eps)
		if !errors.Is(err, tc.errIs) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.errIs)
			continue
		}
		if tc.errIs == nil && !nearSlice(got, tc.want, 1e-7) {
			t.Errorf("%s (%s): q = %v, want %v", tc.name, tc.source, got, tc.want)
		}
	}
}

func TestGroupAdvantages(t *testing.T) {
	s := math.Sqrt(0.5) // unbiased std of {1, 0}
	tests := []struct {
		name  string
		u     []float64
		k     int
		scale bool
		want  []float64
	}{
		// spec §1.4: A = (u - mean)/(std_unbiased + 1e-4).
		{name: "scaled", u: []float64{1, 0}, k: 2, scale: true, want: []float64{0.5 / (s + 1e-4), -0.5 / (s + 1e-4)}},
		// spec §1.4 scale_rewards false (Dr.GRPO): A = u - mean.
		{name: "unscaled", u: []float64{1, 0, 3, 5}, k: 2, scale: false, want: []float64{0.5, -0.5, -1, 1}},
		// K = 1: std 0, A = 0.
		{name: "K=1", u: []float64{3, 4}, k: 1, scale: true, want: []float64{0, 0}},
		// all-equal rewards: A = 0 exactly.
		{name: "all equal", u: []float64{0.1, 0.1, 0.1}, k: 3, scale: true, want: []float64{0, 0, 0}},
	}
	for _, tc := range tests {
		got, err := GroupAdvantages(tc.u, tc.k, tc.scale)
		if err != nil || !nearSlice(got, tc.want, 1e-12) {
			t.Errorf("%s: advantages = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := GroupAdvantages([]float64{math.Inf(1), 0}, 2, true); !errors.Is(err, ErrNonFinite) {
		t.Errorf("Inf utility: err = %v, want ErrNonFinite", err)
	}
}

func TestZeroVarianceGroups(t *testing.T) {
	got, err := ZeroVarianceGroups([]float64{1, 1, 0, 1, 0.5, 0.5}, 2)
	want := []bool{true, false, true}
	if err != nil || len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("ZeroVarianceGroups = %v, %v; want %v", got, err, want)
	}
	if f := FractionTrue(got); !near(f, 2.0/3, 1e-15) {
		t.Errorf("frac_reward_zero_std = %v, want 2/3", f)
	}
}

// TestInvariantToGroupShift checks that adding a constant to one group's
// utilities changes neither q, nor the advantages, nor the weights.
func TestInvariantToGroupShift(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	const p, k = 5, 4
	u := make([]float64, p*k)
	for i := range u {
		u[i] = r.Float64()
	}
	shifted := make([]float64, len(u))
	for i, v := range u {
		shifted[i] = v + float64(i/k)*3.7 - 5
	}
	for _, scale := range []bool{true, false} {
		a1, _ := GroupAdvantages(u, k, scale)
		a2, _ := GroupAdvantages(shifted, k, scale)
		if !nearSlice(a1, a2, 1e-9) {
			t.Errorf("scale=%v: advantages changed under a group shift: %v vs %v", scale, a1, a2)
		}
	}
	q1, _ := QDistribution(u, k, 0.7, 1e-6)
	q2, _ := QDistribution(shifted, k, 0.7, 1e-6)
	if !nearSlice(q1, q2, 1e-12) {
		t.Errorf("q changed under a group shift: %v vs %v", q1, q2)
	}
	w1, _ := ListwiseWeights(q1, nil, nil, k, 0.5, 0, WeightOptions{})
	w2, _ := ListwiseWeights(q2, nil, nil, k, 0.5, 0, WeightOptions{})
	if !nearSlice(w1, w2, 1e-12) {
		t.Errorf("weights changed under a group shift: %v vs %v", w1, w2)
	}
}

func TestScaleGroupsAndEntropies(t *testing.T) {
	got, err := ScaleGroups([]float64{1, 2, 3, 4}, 2, []float64{0.5, math.NaN()})
	if err != nil || !nearSlice(got, []float64{0.5, 1, 3, 4}, 0) {
		t.Errorf("ScaleGroups = %v, %v; want [0.5 1 3 4] (non-finite scale -> 1, spec §1.5)", got, err)
	}
	h, err := GroupEntropies([]float64{0.5, 0.5, 1, 0}, 2)
	if err != nil || !nearSlice(h, []float64{math.Ln2, 0}, 1e-12) {
		t.Errorf("GroupEntropies = %v, %v; want [ln2 0]", h, err)
	}
}

// huge is a finite utility whose sums and squares overflow float64.
const huge = 1.7e308

func TestGroupAdvantagesOverflow(t *testing.T) {
	r := 1 / math.Sqrt2
	tests := []struct {
		name  string
		u     []float64
		k     int
		scale bool
		want  []float64 // nil: an ErrNonFinite error naming the magnitude
		zero  []bool
	}{
		{"equal huge, scaled", []float64{huge, huge}, 2, true, []float64{0, 0}, []bool{true}},
		{"equal huge, unscaled", []float64{huge, huge, huge}, 3, false, []float64{0, 0, 0}, []bool{true}},
		{"equal huge beside a normal group", []float64{-huge, -huge, 1, 3}, 2, true,
			[]float64{0, 0, -1 / (math.Sqrt2 + AdvantageStdEpsilon), 1 / (math.Sqrt2 + AdvantageStdEpsilon)}, []bool{true, false}},
		// the unbiased std (2.4e308) overflows; (u - mean)/std = ±1/√2.
		{"opposite huge, scaled", []float64{huge, -huge}, 2, true, []float64{r, -r}, []bool{false}},
		// mean 0: u - mean = ±1.7e308 is still a float64.
		{"opposite huge, unscaled", []float64{huge, -huge}, 2, false, []float64{huge, -huge}, []bool{false}},
		// mean -1.7e308/3: u_0 - mean = 2.27e308 is not a float64.
		{"advantage beyond float64", []float64{huge, -huge, -huge}, 3, false, nil, []bool{false}},
	}
	for _, tt := range tests {
		a, err := GroupAdvantages(tt.u, tt.k, tt.scale)
		switch {
		case tt.want == nil:
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "magnitude 1.7e+308") {
				t.Errorf("%s: err = %v, want ErrNonFinite naming magnitude 1.7e+308", tt.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case !nearSlice(a, tt.want, 1e-12):
			t.Errorf("%s: advantages = %v, want %v", tt.name, a, tt.want)
		}
		if zero, err := ZeroVarianceGroups(tt.u, tt.k); err != nil || !slices.Equal(zero, tt.zero) {
			t.Errorf("%s: zero std = %v (%v), want %v", tt.name, zero, err, tt.zero)
		}
	}
	// equal utilities give exactly 0, not a rounding residue.
	if a, _ := GroupAdvantages([]float64{huge, huge}, 2, true); a[0] != 0 || a[1] != 0 {
		t.Errorf("equal huge advantages = %v, want exactly 0", a)
	}
}

func TestQDistributionOverflow(t *testing.T) {
	tests := []struct {
		name     string
		u        []float64
		temp     float64
		eps      float64
		want     []float64
		exactSum bool
	}{
		// u/T overflows to +Inf for both: softmax of equal logits.
		{"equal huge", []float64{huge, huge}, 0.5, 0, []float64{0.5, 0.5}, true},
		{"equal huge, floor", []float64{huge, huge}, 0.5, 1e-6, []float64{0.5, 0.5}, true},
		{"huge over tiny T", []float64{1e301, 0}, 1e-8, 0, []float64{1, 0}, true},
		{"opposite huge", []float64{-huge, huge}, 0.25, 0, []float64{0, 1}, true},
		{"opposite huge, floor", []float64{-huge, huge}, 0.25, 0.1, []float64{0.1, 0.9}, false},
	}
	for _, tt := range tests {
		q, err := QDistribution(tt.u, len(tt.u), tt.temp, tt.eps)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !nearSlice(q, tt.want, 1e-12) || (tt.exactSum && !slices.Equal(q, tt.want)) {
			t.Errorf("%s: q = %v, want %v", tt.name, q, tt.want)
		}
	}
}
