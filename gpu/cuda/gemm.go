package cuda

import (
	"errors"
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/internal/bf16"
)

// Math is how a Gemm multiplies and what its A and B hold.
type Math int

const (
	// MathFP32: A and B fp32, products and sums in fp32 on CUDA cores
	// (cublasGemmEx with CUBLAS_COMPUTE_32F).
	MathFP32 Math = iota
	// MathTF32: A and B fp32, rounded to TF32 (10-bit mantissa) for the
	// tensor cores, sums in fp32 (CUBLAS_COMPUTE_32F_FAST_TF32).
	MathTF32
	// MathBF16: A and B bf16 (uint16 bit patterns, see BF16), sums in fp32
	// (CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F): mixed precision, as
	// PyTorch autocast.
	MathBF16
)

func (m Math) String() string {
	switch m {
	case MathFP32:
		return "fp32"
	case MathTF32:
		return "tf32"
	case MathBF16:
		return "bf16"
	}
	return fmt.Sprintf("Math(%d)", int(m))
}

// Gemm is one row-major matrix product, or a batch of them,
//
//	C_i = Alpha·op(A_i)·op(B_i) + Beta·C_i,   i < Batch,
//
// with op(A) [M, K], op(B) [K, N], C [M, N], op(X) = Xᵀ when TransX; each
// matrix row-major with its leading dimension (elements between rows), and
// matrix i of a batch at X + i·StrideX elements. C is fp32, or bf16 when
// CBF16 (MathBF16 only). With Beta 0, C is not read (NaN there stays out).
// The device maps it onto cuBLAS's column-major convention as
// Cᵀ = op(B)ᵀ·op(A)ᵀ (see product.columnMajor).
type Gemm struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float32
	A, B, C                   Ptr
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int64 // elements; used when Batch > 1
	Batch                     int   // 0 or 1: one product
	Math                      Math
	CBF16                     bool
}

// ErrGemm is wrapped by every Gemm argument error.
var ErrGemm = errors.New("cuda: bad gemm")

// Count is the number of products (Batch, at least 1).
func (g Gemm) Count() int { return max(g.Batch, 1) }

// ElemSizes returns the bytes of one element of A and B, and of C.
func (g Gemm) ElemSizes() (ab, c int) {
	ab, c = 4, 4
	if g.Math == MathBF16 {
		ab = 2
	}
	if g.CBF16 {
		c = 2
	}
	return ab, c
}

// Check validates the shape: sizes ≥ 0, leading dimensions ≥ the
// row-major column counts, strides that keep a batch's matrices apart,
// and a C type the math allows.
func (g Gemm) Check() error {
	rowsA, colsA := g.M, g.K
	if g.TransA {
		rowsA, colsA = g.K, g.M
	}
	rowsB, colsB := g.K, g.N
	if g.TransB {
		rowsB, colsB = g.N, g.K
	}
	switch {
	case g.M < 0 || g.N < 0 || g.K < 0 || g.Batch < 0:
		return fmt.Errorf("%w: m=%d n=%d k=%d batch=%d must be ≥ 0", ErrGemm, g.M, g.N, g.K, g.Batch)
	case g.M > math.MaxInt32 || g.N > math.MaxInt32 || g.K > math.MaxInt32:
		return fmt.Errorf("%w: m=%d n=%d k=%d exceed cuBLAS's int", ErrGemm, g.M, g.N, g.K)
	case g.Math < MathFP32 || g.Math > MathBF16:
		return fmt.Errorf("%w: math %v", ErrGemm, g.Math)
	case g.CBF16 && g.Math != MathBF16:
		return fmt.Errorf("%w: a bf16 C needs MathBF16, not %v", ErrGemm, g.Math)
	case g.LDA < max(colsA, 1) || g.LDB < max(colsB, 1) || g.LDC < max(g.N, 1):
		return fmt.Errorf("%w: lda=%d ldb=%d ldc=%d for %d, %d and %d columns", ErrGemm, g.LDA, g.LDB, g.LDC, colsA, colsB, g.N)
	}
	if g.Count() > 1 {
		need := func(rows, ld int) int64 { return int64(max(rows-1, 0)*ld) + 1 }
		if g.StrideA < need(rowsA, g.LDA) && g.StrideA != 0 || g.StrideB < need(rowsB, g.LDB) && g.StrideB != 0 ||
			g.StrideC < need(g.M, g.LDC) {
			return fmt.Errorf("%w: strides %d, %d, %d overlap matrices of %d, %d and %d rows", ErrGemm, g.StrideA, g.StrideB, g.StrideC, rowsA, rowsB, g.M)
		}
	}
	return nil
}

// Empty reports whether the product writes nothing (M or N is 0).
func (g Gemm) Empty() bool { return g.M == 0 || g.N == 0 }

// columnMajor returns the column-major product (cuBLAS's convention) that
// computes g: A and B change places with their flags, leading dimensions
// and strides, and M and N change places.
func (g Gemm) columnMajor() Gemm {
	c := g
	c.TransA, c.TransB = g.TransB, g.TransA
	c.M, c.N = g.N, g.M
	c.A, c.B = g.B, g.A
	c.LDA, c.LDB = g.LDB, g.LDA
	c.StrideA, c.StrideB = g.StrideB, g.StrideA
	return c
}

// BF16 rounds x to bfloat16 (round to nearest even, as CUDA's
// __float2bfloat16 and the kernels' f32_to_bf16), returning its bits: the
// top 16 bits of a float32. NaN becomes the canonical 0x7fff.
func BF16(x float32) uint16 { return bf16.Round(x) }

// BF16ToFloat32 widens bfloat16 bits to the float32 they denote (exact).
func BF16ToFloat32(h uint16) float32 { return bf16.Float32(h) }

// TF32 rounds x to the tensor cores' TF32 (a float32 with a 10-bit
// mantissa), to nearest with ties away from zero as PTX's cvt.rna.tf32.f32;
// NaN and infinities pass through.
func TF32(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f80_0000 == 0x7f80_0000 {
		return x
	}
	u += 0x1000
	return math.Float32frombits(u &^ 0x1fff)
}
