package cuda

import (
	"errors"
	"fmt"
)

// ErrNoCUDA is returned by every call of a build without the cuda tag.
var ErrNoCUDA = errors.New("mgrpo was built without CUDA support; rebuild with -tags cuda")

// ErrGemmArgs is wrapped by Sgemm argument errors.
var ErrGemmArgs = errors.New("cuda: bad sgemm arguments")

// Device describes one CUDA device.
type Device struct {
	// Ordinal is the CUDA device index (as in CUDA_VISIBLE_DEVICES order).
	Ordinal int
	// Name is the marketing name, e.g. "NVIDIA H100 80GB HBM3".
	Name string
	// TotalMemory is the device memory in bytes.
	TotalMemory int64
	// ComputeMajor and ComputeMinor are the compute capability, e.g. 9.0.
	ComputeMajor, ComputeMinor int
}

// String gives "GPU 0: NAME (80.0 GiB, sm_90)".
func (d Device) String() string {
	return fmt.Sprintf("GPU %d: %s (%.1f GiB, sm_%d%d)", d.Ordinal, d.Name,
		float64(d.TotalMemory)/(1<<30), d.ComputeMajor, d.ComputeMinor)
}

// gemmSizes checks row-major Sgemm arguments and returns the number of
// elements of a, b and c that the product reads: op(A) is m×k, op(B) k×n,
// C m×n, each stored row-major with its leading dimension.
func gemmSizes(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) (na, nb, nc int, err error) {
	if m < 0 || n < 0 || k < 0 {
		return 0, 0, 0, fmt.Errorf("%w: m=%d n=%d k=%d must be >= 0", ErrGemmArgs, m, n, k)
	}
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	var errs []error
	check := func(name string, s []float32, rows, cols, ld int) int {
		if ld < max(cols, 1) {
			errs = append(errs, fmt.Errorf("%w: ld%s=%d < %d columns", ErrGemmArgs, name, ld, cols))
			return 0
		}
		need := 0
		if rows > 0 && cols > 0 {
			need = (rows-1)*ld + cols
		}
		if len(s) < need {
			errs = append(errs, fmt.Errorf("%w: len(%s)=%d < %d for %d×%d with ld %d", ErrGemmArgs, name, len(s), need, rows, cols, ld))
		}
		return need
	}
	na = check("a", a, rowsA, colsA, lda)
	nb = check("b", b, rowsB, colsB, ldb)
	nc = check("c", c, m, n, ldc)
	return na, nb, nc, errors.Join(errs...)
}

// scaleC sets C = beta·C (the k = 0 case, where no product is needed).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}

// product is the shape of one Sgemm call: op(A) is m×k, op(B) k×n, C m×n,
// with the operands' leading dimensions.
type product struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
}

// columnMajor returns the column-major call (cuBLAS's convention) that
// computes the row-major product p. Read column-major, a row-major matrix
// is its own transpose, so C = op(A)·op(B) is computed as
// Cᵀ = op(B)ᵀ·op(A)ᵀ: B comes first, each operand keeps its flag and its
// leading dimension, and m and n change places.
func (p product) columnMajor() product {
	return product{transA: p.transB, transB: p.transA, m: p.n, n: p.m, k: p.k, lda: p.ldb, ldb: p.lda, ldc: p.ldc}
}
