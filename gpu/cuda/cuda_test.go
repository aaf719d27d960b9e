//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmMatchesNaive runs on a machine with a GPU (a cuda build cannot
// start without one: cu's init exits).
func TestSgemmMatchesNaive(t *testing.T) {
	devs, err := Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("Devices = %v, %v", devs, err)
	}
	t.Log(devs[0])
	b, err := NewBLAS(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct{ tA, tB bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		m, n, k := 7, 5, 3
		a, bm := make([]float32, m*k), make([]float32, k*n)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range bm {
			bm[i] = float32(rng.NormFloat64())
		}
		lda, ldb := k, n
		if tc.tA {
			lda = m
		}
		if tc.tB {
			ldb = k
		}
		c, want := make([]float32, m*n), make([]float32, m*n)
		for i := range c {
			c[i] = float32(i)
			want[i] = float32(i)
		}
		if err := b.Sgemm(tc.tA, tc.tB, m, n, k, 1.5, a, lda, bm, ldb, 0.5, c, n); err != nil {
			t.Fatal(err)
		}
		sgemmNaive(tc.tA, tc.tB, m, n, k, 1.5, a, lda, bm, ldb, 0.5, want, n)
		for i := range c {
			if math.Abs(float64(c[i]-want[i])) > 1e-4 {
				t.Fatalf("transA=%v transB=%v: c[%d] = %v, want %v", tc.tA, tc.tB, i, c[i], want[i])
			}
		}
	}
}
