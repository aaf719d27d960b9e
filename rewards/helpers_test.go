package rewards

import (
	"math"
	"testing"
)

// near reports whether a and b agree within tol (absolute).
func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// nearSlice reports whether a and b have equal lengths and agree within tol.
func nearSlice(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i], tol) {
			return false
		}
	}
	return true
}

// softmaxRef is the obvious softmax, kept beside the fast one.
func softmaxRef(x []float64) []float64 {
	out := make([]float64, len(x))
	s := 0.0
	for i, v := range x {
		out[i] = math.Exp(v)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// entropyRef is -Σ p ln p.
func entropyRef(p []float64) float64 {
	h := 0.0
	for _, v := range p {
		if v > 0 {
			h -= v * math.Log(v)
		}
	}
	return h
}

// assertNoNaN fails when any value is NaN or Inf.
func assertNoNaN(t *testing.T, name string, x []float64) {
	t.Helper()
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Errorf("%s[%d] = %v, want finite", name, i, v)
		}
	}
}
