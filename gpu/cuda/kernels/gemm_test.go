//go:build cuda || cudaemu

package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
)

// gemmCase is one product of TestGemm; A and B are generated row-major
// with their leading dimensions, batch matrices back to back.
type gemmCase struct {
	tA, tB      bool
	m, n, k     int
	batch       int
	alpha, beta float32
	math        cuda.Math
	cBF16       bool
}

// naive is the float64 product of matrix i, from the values the device
// multiplies (bf16 inputs widened exactly).
func naive(tc gemmCase, a, b, c []float64, lda, ldb, i, r, j int) float64 {
	var s float64
	for p := range tc.k {
		ia, ib := i*tc.m*tc.k+r*lda+p, i*tc.k*tc.n+p*ldb+j
		if tc.tA {
			ia = i*tc.m*tc.k + p*lda + r
		}
		if tc.tB {
			ib = i*tc.k*tc.n + j*ldb + p
		}
		av, bv := a[ia], b[ib]
		s += av * bv
	}
	out := float64(tc.alpha) * s
	if tc.beta != 0 {
		out += float64(tc.beta) * c[i*tc.m*tc.n+r*tc.n+j]
	}
	return out
}

// tolerance bounds |device − exact| relative to Σ|a·b|: fp32 sums
// (k·2⁻²⁴ with room), TF32's 10-bit inputs (2⁻⁹ a product even if the
// tensor cores truncate), and a bf16 C's rounding.
func tolerance(tc gemmCase) float64 {
	tol := 4 * float64(tc.k) * 0x1p-24
	if tc.math == cuda.MathTF32 {
		tol += 0x1p-9
	}
	if tc.cBF16 {
		tol += 0x1p-8
	}
	return tol
}

func TestGemm(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var cases []gemmCase
	for _, mth := range []cuda.Math{cuda.MathFP32, cuda.MathTF32, cuda.MathBF16} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			cases = append(cases, gemmCase{tr[0], tr[1], 7, 5, 33, 1, 1.5, 0, mth, false})
		}
		cases = append(cases, gemmCase{false, true, 9, 17, 64, 3, 1, 0.5, mth, false})
	}
	cases = append(cases, gemmCase{true, false, 16, 8, 40, 2, 1, 1, cuda.MathBF16, true})
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v_tA=%v_tB=%v_batch=%d_cbf16=%v", tc.math, tc.tA, tc.tB, tc.batch, tc.cBF16), func(t *testing.T) {
			runGemmCase(t, rt, rng, tc)
		})
	}
}

func runGemmCase(t *testing.T, rt cuda.Runtime, rng *rand.Rand, tc gemmCase) {
	count := max(tc.batch, 1)
	lda, ldb := tc.k, tc.n
	if tc.tA {
		lda = tc.m
	}
	if tc.tB {
		ldb = tc.k
	}
	gen := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(cuda.BF16ToFloat32(cuda.BF16(float32(rng.NormFloat64())))) // bf16-exact, for every mode
			if tc.math != cuda.MathBF16 {
				v[i] += rng.NormFloat64() * 0x1p-12 // below bf16's precision: TF32 and fp32 see it
			}
		}
		return v
	}
	a, b, c := gen(count*tc.m*tc.k), gen(count*tc.k*tc.n), gen(count*tc.m*tc.n)
	if tc.beta == 0 {
		for i := range c {
			c[i] = math.NaN() // not read
		}
	}
	g := cuda.Gemm{TransA: tc.tA, TransB: tc.tB, M: tc.m, N: tc.n, K: tc.k, Alpha: tc.alpha, Beta: tc.beta,
		LDA: lda, LDB: ldb, LDC: tc.n, StrideA: int64(tc.m * tc.k), StrideB: int64(tc.k * tc.n), StrideC: int64(tc.m * tc.n),
		Batch: tc.batch, Math: tc.math, CBF16: tc.cBF16}
	g.A, g.B, g.C = upload(t, rt, a, tc.math == cuda.MathBF16), upload(t, rt, b, tc.math == cuda.MathBF16), upload(t, rt, c, tc.cBF16)
	cudatest.Must(t, rt.Gemm(g))
	got := download(t, rt, g.C, len(c), tc.cBF16)
	for i := range count {
		for r := range tc.m {
			for j := range tc.n {
				want := naive(tc, a, b, c, lda, ldb, i, r, j)
				abs := naive(gemmCase{tA: tc.tA, tB: tc.tB, m: tc.m, n: tc.n, k: tc.k, alpha: 1}, absAll(a), absAll(b), nil, lda, ldb, i, r, j)
				if tc.beta != 0 {
					abs += math.Abs(float64(tc.beta) * c[i*tc.m*tc.n+r*tc.n+j])
				}
				if d := math.Abs(got[i*tc.m*tc.n+r*tc.n+j] - want); !(d <= tolerance(tc)*abs) {
					t.Fatalf("C[%d][%d,%d] = %v, want %v (|diff| %.3g > %.3g·%.3g)", i, r, j, got[i*tc.m*tc.n+r*tc.n+j], want, d, tolerance(tc), abs)
				}
			}
		}
	}
}

func absAll(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Abs(v)
	}
	return out
}

// upload stores x as float32 or as bf16 (x must then be bf16-exact).
func upload(t *testing.T, rt cuda.Runtime, x []float64, bf16 bool) cuda.Ptr {
	if bf16 {
		h := make([]uint16, len(x))
		for i, v := range x {
			h[i] = cuda.BF16(float32(v))
		}
		return cudatest.Upload(t, rt, h)
	}
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = float32(v)
	}
	return cudatest.Upload(t, rt, f)
}

func download(t *testing.T, rt cuda.Runtime, p cuda.Ptr, n int, bf16 bool) []float64 {
	out := make([]float64, n)
	if bf16 {
		for i, h := range cudatest.Download[uint16](t, rt, p, n) {
			out[i] = float64(cuda.BF16ToFloat32(h))
		}
		return out
	}
	for i, v := range cudatest.Download[float32](t, rt, p, n) {
		out[i] = float64(v)
	}
	return out
}
