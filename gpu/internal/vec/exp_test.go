package vec

import (
	"math"
	"testing"
)

// Exp against float64 math.Exp over the range the kernels use.
func TestExp(t *testing.T) {
	worst := 0.0
	var xs []float32
	for x := -87.0; x <= 88.0; x += 0.001 {
		xs = append(xs, float32(x))
	}
	row := make([]float32, len(xs))
	expShiftGo(row, xs, 0, 1) // the inlined loop must agree with Exp
	for i, x := range xs {
		got, want := float64(Exp(x)), math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
		if row[i] != Exp(x) {
			t.Fatalf("expShiftGo gives %g at %g, Exp %g", row[i], x, Exp(x))
		}
	}
	if worst > 4e-7 { // float32 ulp is 6e-8 to 1.2e-7 relative
		t.Errorf("Exp worst relative error %.3g, want ≤ 4e-7", worst)
	}
	t.Logf("Exp worst relative error %.3g", worst)
	for _, tc := range []struct{ x, want float32 }{
		{0, 1}, {-100, 1.2192e-38}, {100, float32(math.Inf(1))},
	} {
		if got := Exp(tc.x); got != tc.want && math.Abs(float64(got-tc.want)) > 1e-4*float64(tc.want) {
			t.Errorf("Exp(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
	if nan := Exp(float32(math.NaN())); nan == nan {
		t.Errorf("Exp(NaN) = %g, want NaN", nan)
	}
}
