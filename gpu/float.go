package gpu

import (
	"unsafe"

	"gonum.org/v1/gonum/blas"
)

// Float is the element type of the model's buffers: float32 in production,
// float64 in the gradient checks, which run the very same kernels.
type Float interface{ ~float32 | ~float64 }

// is32 reports whether F is a 32-bit float (the kernels dispatch BLAS on it).
func is32[F Float]() bool { var z F; return unsafe.Sizeof(z) == 4 }

// as32 and as64 reinterpret a generic slice as its concrete type without
// copying or allocating; callers check is32 first.
func as32[F Float](s []F) []float32 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&s[0])), len(s))
}

func as64[F Float](s []F) []float64 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&s[0])), len(s))
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// gemm computes c = alpha·op(a)·op(b) + beta·c for row-major matrices, where
// op(x) is x or xᵀ; op(a) is [m, k], op(b) is [k, n], c is [m, n].
func gemm[F Float](tA, tB bool, m, n, k int, alpha F, a []F, lda int, b []F, ldb int, beta F, c []F, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if is32[F]() {
		blas32Impl.Sgemm(trans(tA), trans(tB), m, n, k, float32(alpha), as32(a), lda, as32(b), ldb, float32(beta), as32(c), ldc)
		return
	}
	blas64Impl.Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), as64(a), lda, as64(b), ldb, float64(beta), as64(c), ldc)
}

// minRowsPerWorker keeps small products on one goroutine, where splitting
// costs more than it saves.
const minRowsPerWorker = 32

// splitRows runs f over [0, n) in contiguous row blocks on up to workers
// goroutines. Each output row is computed by exactly one call with the same
// inner dimension, so results do not depend on the split.
func splitRows(n, workers int, f func(lo, hi int)) {
	parallelFor(n, min(workers, max(n/minRowsPerWorker, 1)), func(_, lo, hi int) { f(lo, hi) })
}

// matmulNT computes dst = x·wᵀ (+ dst when accumulate): x is [n, in], w is
// [out, in] (Hugging Face layout), dst is [n, out].
func matmulNT[F Float](dst, x, w []F, n, in, out int, accumulate bool, workers int) {
	beta := F(0)
	if accumulate {
		beta = 1
	}
	if workers <= 1 {
		gemm(false, true, n, out, in, 1, x, in, w, in, beta, dst, out)
		return
	}
	splitRows(n, workers, func(lo, hi int) {
		gemm(false, true, hi-lo, out, in, 1, x[lo*in:], in, w, in, beta, dst[lo*out:], out)
	})
}

// matmulNN computes dst = dy·w (+ dst when accumulate): dy is [n, out], w is
// [out, in], dst is [n, in]; the input gradient of matmulNT.
func matmulNN[F Float](dst, dy, w []F, n, in, out int, accumulate bool, workers int) {
	beta := F(0)
	if accumulate {
		beta = 1
	}
	if workers <= 1 {
		gemm(false, false, n, in, out, 1, dy, out, w, in, beta, dst, in)
		return
	}
	splitRows(n, workers, func(lo, hi int) {
		gemm(false, false, hi-lo, in, out, 1, dy[lo*out:], out, w, in, beta, dst[lo*in:], in)
	})
}

// matmulTNAdd accumulates the weight gradient of matmulNT: dw += dyᵀ·x, with
// dy [n, out], x [n, in], dw [out, in]; split over the rows of dw.
func matmulTNAdd[F Float](dw, dy, x []F, n, in, out int, workers int) {
	if workers <= 1 {
		gemm(true, false, out, in, n, 1, dy, out, x, in, 1, dw, in)
		return
	}
	splitRows(out, workers, func(lo, hi int) {
		gemm(true, false, hi-lo, in, n, 1, dy[lo:], out, x, in, 1, dw[lo*in:], in)
	})
}
