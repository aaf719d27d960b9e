package cuda

import (
	"errors"
	"math/rand/v2"
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

// sgemmColumnMajor is the obvious column-major C = alpha·op(A)·op(B) +
// beta·C, the convention of cuBLAS.
func sgemmColumnMajor(p product, alpha float32, a, b []float32, beta float32, c []float32) {
	at := func(i, q int) float32 {
		if p.transA {
			return a[i*p.lda+q]
		}
		return a[q*p.lda+i]
	}
	bt := func(q, j int) float32 {
		if p.transB {
			return b[q*p.ldb+j]
		}
		return b[j*p.ldb+q]
	}
	for i := range p.m {
		for j := range p.n {
			var s float32
			for q := range p.k {
				s += at(i, q) * bt(q, j)
			}
			c[j*p.ldc+i] = alpha*s + beta*c[j*p.ldc+i]
		}
	}
}

// TestColumnMajorMapping checks, without a GPU, the call Sgemm makes to
// cuBLAS: the column-major product of columnMajor, with B passed first,
// gives the row-major product for every transpose combination and padded
// leading dimensions.
func TestColumnMajorMapping(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.IntN(7) - 3)
		}
		return s
	}
	const m, n, k, pad = 5, 4, 3, 2
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			p := product{transA: tA, transB: tB, m: m, n: n, k: k, lda: k + pad, ldb: n + pad, ldc: n + pad}
			rowsA, rowsB := m, k
			if tA {
				rowsA, p.lda = k, m+pad
			}
			if tB {
				rowsB, p.ldb = n, k+pad
			}
			a, b, c := fill(rowsA*p.lda), fill(rowsB*p.ldb), fill(m*p.ldc)
			want := append([]float32(nil), c...)
			sgemmNaive(tA, tB, m, n, k, 2, a, p.lda, b, p.ldb, 0.5, want, p.ldc)
			sgemmColumnMajor(p.columnMajor(), 2, b, a, 0.5, c)
			for i := range c {
				if c[i] != want[i] {
					t.Fatalf("transA=%v transB=%v: c[%d] = %v, row-major product gives %v", tA, tB, i, c[i], want[i])
				}
			}
		}
	}
}
