package cuda

import (
	"errors"
	"strings"
	"testing"
)

// sgemmNaive is the obvious row-major C = alpha·op(A)·op(B) + beta·C, the
// reference the cuBLAS path is tested against (cuda_test.go).
func sgemmNaive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	at := func(i, p int) float32 {
		if transA {
			return a[p*lda+i]
		}
		return a[i*lda+p]
	}
	bt := func(p, j int) float32 {
		if transB {
			return b[j*ldb+p]
		}
		return b[p*ldb+j]
	}
	for i := range m {
		for j := range n {
			var s float32
			for p := range k {
				s += at(i, p) * bt(p, j)
			}
			c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
		}
	}
}

func TestGemmSizes(t *testing.T) {
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 12)
	cases := []struct {
		name             string
		tA, tB           bool
		m, n, k          int
		lda, ldb, ldc    int
		wantA, wantB, wC int
		err              string
	}{
		{"2x3 · 3x4", false, false, 2, 4, 3, 3, 4, 4, 6, 12, 8, ""},
		{"transposed A (3x2 stored)", true, false, 2, 4, 3, 2, 4, 4, 6, 12, 8, ""},
		{"padded ld", false, true, 2, 2, 3, 5, 3, 3, 8, 6, 5, ""},
		{"empty", false, false, 0, 0, 0, 1, 1, 1, 0, 0, 0, ""},
		{"negative", false, false, -1, 1, 1, 1, 1, 1, 0, 0, 0, "m=-1"},
		{"ld too small", false, false, 2, 4, 3, 2, 4, 4, 0, 0, 0, "lda=2 < 3 columns"},
		{"a too short", false, false, 4, 4, 4, 4, 4, 4, 0, 0, 0, "len(a)=12 < 16"},
	}
	for _, tc := range cases {
		na, nb, nc, err := gemmSizes(tc.tA, tc.tB, tc.m, tc.n, tc.k, a, tc.lda, b, tc.ldb, c, tc.ldc)
		if tc.err != "" {
			if !errors.Is(err, ErrGemmArgs) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || na != tc.wantA || nb != tc.wantB || nc != tc.wC {
			t.Errorf("%s: sizes = %d %d %d (%v), want %d %d %d", tc.name, na, nb, nc, err, tc.wantA, tc.wantB, tc.wC)
		}
	}
}

func TestScaleC(t *testing.T) {
	c := []float32{1, 2, 99, 3, 4, 99}
	scaleC(2, 2, 0.5, c, 3)
	want := []float32{0.5, 1, 99, 1.5, 2, 99}
	for i := range c {
		if c[i] != want[i] {
			t.Fatalf("scaleC = %v, want %v", c, want)
		}
	}
	// The naive reference agrees with a product done by hand:
	// [1 2; 3 4]·[5 6; 7 8] = [19 22; 43 50].
	out := make([]float32, 4)
	sgemmNaive(false, false, 2, 2, 2, 1, []float32{1, 2, 3, 4}, 2, []float32{5, 6, 7, 8}, 2, 0, out, 2)
	if out[0] != 19 || out[1] != 22 || out[2] != 43 || out[3] != 50 {
		t.Errorf("naive = %v", out)
	}
}

func TestDeviceString(t *testing.T) {
	d := Device{Ordinal: 1, Name: "Test GPU", TotalMemory: 80 << 30, ComputeMajor: 9, ComputeMinor: 0}
	if got := d.String(); got != "GPU 1: Test GPU (80.0 GiB, sm_90)" {
		t.Errorf("String = %q", got)
	}
}
