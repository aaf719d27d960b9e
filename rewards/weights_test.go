package rewards

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestWeightVectorClosedForm is test_run_training_weighting.py's closed-form
// case (spec §1.8): tau 0.5, beta 0.4, q [.8 .2], ref [0 1].
func TestWeightVectorClosedForm(t *testing.T) {
	want := softmaxRef([]float64{math.Log(0.8) / 0.5, (math.Log(0.2) + 0.4) / 0.5})
	got, err := ListwiseWeightsTo(nil, []float64{0.8, 0.2}, []float64{0, 1}, WeightDenominatorTau.Value(0.5, 0.4), 0.4)
	if err != nil || !nearSlice(got, want, 1e-12) {
		t.Errorf("weights = %v, %v; want %v", got, err, want)
	}
	// The paper form D = tau + beta (DESIGN §3 option).
	want = softmaxRef([]float64{math.Log(0.8) / 0.9, (math.Log(0.2) + 0.4) / 0.9})
	got, err = ListwiseWeightsTo(nil, []float64{0.8, 0.2}, []float64{0, 1}, WeightDenominatorTauPlusBeta.Value(0.5, 0.4), 0.4)
	if err != nil || !nearSlice(got, want, 1e-12) {
		t.Errorf("tau+beta weights = %v, %v; want %v", got, err, want)
	}
}

// TestWeightMatrixEqualsRows: weight_matrix_from_q == weight_vector_from_q
// row-wise (spec §1.8, tested to 1e-6 in the original).
func TestWeightMatrixEqualsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	const p, k = 6, 5
	u, ref := make([]float64, p*k), make([]float64, p*k)
	for i := range u {
		u[i], ref[i] = r.NormFloat64(), -r.Float64()*3
	}
	q, _ := QDistribution(u, k, 1.3, 1e-6)
	for _, den := range []WeightDenominator{WeightDenominatorTau, WeightDenominatorTauPlusBeta} {
		w, err := ListwiseWeights(q, ref, nil, k, 0.7, 0.2, WeightOptions{Denominator: den})
		if err != nil {
			t.Fatal(err)
		}
		for g := range p {
			row, _ := ListwiseWeightsTo(nil, q[g*k:(g+1)*k], ref[g*k:(g+1)*k], den.Value(0.7, 0.2), 0.2)
			if !nearSlice(w[g*k:(g+1)*k], row, 1e-12) {
				t.Errorf("%v group %d: matrix row %v, vector %v", den, g, w[g*k:(g+1)*k], row)
			}
		}
	}
}

// TestQTemperatureNotReapplied: with tau 1 and beta 0 the weights equal q
// exactly, whatever temperature formed q (spec §1.3, §6).
func TestQTemperatureNotReapplied(t *testing.T) {
	u := []float64{1, 0.2, 0}
	for _, tq := range []float64{0.5, 1, 2} {
		q, _ := QDistribution(u, 3, tq, 1e-6)
		w, err := ListwiseWeights(q, nil, nil, 3, 1, 0, WeightOptions{})
		if err != nil || !nearSlice(w, q, 1e-12) {
			t.Errorf("T_q=%v: weights %v, want q %v", tq, w, q)
		}
	}
}

// TestWeightEntropyIncreasesWithTau (spec §6 "entropy increases with tau").
func TestWeightEntropyIncreasesWithTau(t *testing.T) {
	q := []float64{0.6, 0.3, 0.1}
	prev := -1.0
	for _, tau := range []float64{0.1, 0.25, 0.5, 1, 2, 5} {
		w, _ := ListwiseWeightsTo(nil, q, nil, tau, 0)
		h := entropyRef(w)
		if h <= prev {
			t.Errorf("tau=%v: entropy %v not above %v", tau, h, prev)
		}
		prev = h
	}
}

// TestBetaTiltsTowardReference (spec §6 "beta>0 moves mass toward higher ref logp").
func TestBetaTiltsTowardReference(t *testing.T) {
	q, ref := []float64{0.5, 0.5}, []float64{-3, -1}
	w0, _ := ListwiseWeightsTo(nil, q, ref, 1, 0)
	w1, _ := ListwiseWeightsTo(nil, q, ref, 1, 0.5)
	if !(w1[1] > w0[1]) || !near(w0[1], 0.5, 1e-12) {
		t.Errorf("beta 0: %v, beta 0.5: %v; want mass moved to index 1", w0, w1)
	}
}

// TestNoTokenReweightingByDefault: q [.5 .5], T [1 100] -> [.5 .5] (spec §1.8).
func TestNoTokenReweightingByDefault(t *testing.T) {
	w, err := ListwiseWeights([]float64{0.5, 0.5}, nil, []int{1, 100}, 2, 1, 0, WeightOptions{})
	if err != nil || !nearSlice(w, []float64{0.5, 0.5}, 1e-12) {
		t.Errorf("default weights = %v, %v; want [.5 .5]", w, err)
	}
	w, err = ListwiseWeights([]float64{0.5, 0.5}, nil, []int{1, 100}, 2, 1, 0, WeightOptions{NormalizeByTokens: true})
	if err != nil || !nearSlice(w, []float64{1.0 / 101, 100.0 / 101}, 1e-12) {
		t.Errorf("token-renormalised weights = %v, %v; want [1/101 100/101]", w, err)
	}
}

// TestWeightsAreDistribution is a property test over random groups.
func TestWeightsAreDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := range 200 {
		k := 1 + r.IntN(9)
		q, ref := make([]float64, k), make([]float64, k)
		for i := range q {
			q[i], ref[i] = r.Float64()*r.Float64(), -r.Float64()*50
		}
		q[r.IntN(k)] = 0 // a zero entry is clamped, not -Inf
		tau, beta := math.Exp(r.NormFloat64()*2), r.Float64()
		w, err := ListwiseWeightsTo(nil, q, ref, tau, beta)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		s := 0.0
		for _, v := range w {
			if !(v >= 0) || v > 1 {
				t.Fatalf("trial %d: weight %v out of [0,1]: %v", trial, v, w)
			}
			s += v
		}
		if !near(s, 1, 1e-12) {
			t.Fatalf("trial %d: weights sum to %v", trial, s)
		}
	}
}

func TestWeightEdgeCases(t *testing.T) {
	// K = 1: weight 1.
	w, err := ListwiseWeightsTo(nil, []float64{1}, []float64{-4}, 0.5, 1)
	if err != nil || !nearSlice(w, []float64{1}, 0) {
		t.Errorf("K=1 weights = %v, %v; want [1]", w, err)
	}
	// all-equal q -> uniform.
	w, _ = ListwiseWeightsTo(nil, []float64{0.25, 0.25, 0.25, 0.25}, nil, 0.3, 0)
	if !nearSlice(w, []float64{0.25, 0.25, 0.25, 0.25}, 1e-15) {
		t.Errorf("uniform q weights = %v", w)
	}
	// dst reuse and aliasing q.
	q := []float64{0.8, 0.2}
	w, _ = ListwiseWeightsTo(q, q, nil, 1, 0)
	if &w[0] != &q[0] || !nearSlice(w, []float64{0.8, 0.2}, 1e-12) {
		t.Errorf("in-place weights = %v", w)
	}
	errCases := []struct {
		name string
		q    []float64
		ref  []float64
		d    float64
		beta float64
		want error
	}{
		{"empty", nil, nil, 1, 0, ErrEmptyGroup},
		{"NaN q", []float64{math.NaN(), 1}, nil, 1, 0, ErrNonFinite},
		{"negative q", []float64{-0.1, 1}, nil, 1, 0, ErrNonFinite},
		{"Inf ref", []float64{0.5, 0.5}, []float64{math.Inf(-1), 0}, 1, 0.1, ErrNonFinite},
		{"zero denominator", []float64{0.5, 0.5}, nil, 0, 0, ErrParam},
		{"ref length", []float64{0.5, 0.5}, []float64{0}, 1, 0.1, ErrShape},
	}
	for _, tc := range errCases {
		if _, err := ListwiseWeightsTo(nil, tc.q, tc.ref, tc.d, tc.beta); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Inf ref with beta 0 is ignored (the ref term is absent).
	if _, err := ListwiseWeightsTo(nil, []float64{0.5, 0.5}, []float64{math.Inf(-1), 0}, 1, 0); err != nil {
		t.Errorf("Inf ref with beta 0: %v", err)
	}
	// denominator floor 1e-8 for tau <= 0.
	if d := WeightDenominatorTau.Value(-1, 0); d != DenominatorFloor {
		t.Errorf("D(tau=-1) = %v, want 1e-8", d)
	}
}

func TestWeightEntropyStats(t *testing.T) {
	// group 1 uniform (H = ln 2), group 2 one-hot (H = 0), K = 2.
	st, err := WeightEntropy([]float64{0.5, 0.5, 1, 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !near(st.Mean, math.Ln2/2, 1e-12) || !near(st.Min, 0, 1e-9) || !near(st.Max, math.Ln2, 1e-12) {
		t.Errorf("entropy mean/min/max = %v/%v/%v, want ln2/2, 0, ln2", st.Mean, st.Min, st.Max)
	}
	if !near(st.NormMean, 0.5, 1e-9) {
		t.Errorf("weight_entropy_norm = %v, want 0.5", st.NormMean)
	}
	// samples w - 1/K = [0 0 .5 -.5]: mean 0, population std sqrt(.125).
	if !near(st.AdvantageEntropyMean, 0, 1e-15) || !near(st.AdvantageEntropyStd, math.Sqrt(0.125), 1e-12) {
		t.Errorf("advantage entropy = %v ± %v", st.AdvantageEntropyMean, st.AdvantageEntropyStd)
	}
	if st, err := WeightEntropy(nil, 4); err != nil || st != (WeightEntropyStats{}) {
		t.Errorf("empty: %v, %v; want zero stats", st, err)
	}
	if st, err := WeightEntropy([]float64{1, 1}, 1); err != nil || st.Mean != 0 || st.NormMean != 0 {
		t.Errorf("K=1: %+v, %v; want zero entropy", st, err)
	}
}
