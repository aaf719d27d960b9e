package gpu

import "github.com/mgrpo/mgrpo/gpu/internal/panel"

// linear runs the model's weight products on one device: every x·Wᵀ of the
// forward pass (the q/k/v, o, gate/up and down projections and lm_head,
// which hold nearly all of the model's FLOPs) and the two gradients of each.
// Weights are [out, in] (Hugging Face layout); all matrices are row-major.
// The small per-head attention products stay on the CPU kernels.
//
// A device may fail (a CUDA error, say); the methods cannot return errors
// mid-pass, so a failed product records its error, later products are
// skipped, and the caller asks Err once the pass is done, before it uses
// any result.
type linear[F Float] interface {
	// NT computes dst = x·wᵀ (+ dst when accumulate); x [n, in], dst [n, out].
	NT(dst, x, w []F, n, in, out int, accumulate bool)
	// NN computes dst = dy·w (+ dst when accumulate); dy [n, out], dst [n, in].
	NN(dst, dy, w []F, n, in, out int, accumulate bool)
	// TNAdd accumulates dw += dyᵀ·x; dy [n, out], x [n, in], dw [out, in].
	TNAdd(dw, dy, x []F, n, in, out int)
	// Err returns the first error since the last call to Err and clears it.
	Err() error
}

// cpuLinear runs the products on the CPU, split by rows over workers
// goroutines: through the packed weights of pk for the weights it holds,
// through the build's BLAS otherwise. It never fails.
type cpuLinear[F Float] struct {
	workers int
	pk      *packedWeights // nil: BLAS only
}

func (c cpuLinear[F]) NT(dst, x, w []F, n, in, out int, accumulate bool) {
	if c.pk != nil {
		if b := lookup(c.pk.nt, w); b != nil {
			mulPacked(b, dst[:n*out], x[:n*in], n, accumulate, c.workers)
			return
		}
	}
	matmulNT(dst, x, w, n, in, out, accumulate, c.workers)
}

func (c cpuLinear[F]) NN(dst, dy, w []F, n, in, out int, accumulate bool) {
	if c.pk != nil {
		if b := lookup(c.pk.nn, w); b != nil {
			mulPacked(b, dst[:n*in], dy[:n*out], n, accumulate, c.workers)
			return
		}
	}
	matmulNN(dst, dy, w, n, in, out, accumulate, c.workers)
}

func (c cpuLinear[F]) TNAdd(dw, dy, x []F, n, in, out int) {
	if c.pk != nil && in%panel.Width() == 0 {
		d, y, xs := as32(dw), as32(dy), as32(x)
		splitRows(out, c.workers, func(lo, hi int) {
			panel.AddTN(d[lo*in:hi*in], y[lo:], out, xs, n, hi-lo, in)
		})
		return
	}
	matmulTNAdd(dw, dy, x, n, in, out, c.workers)
}

func (cpuLinear[F]) Err() error { return nil }

// sgemmer is a single-precision matrix product on a device, row-major like
// gonum's blas32 (cuda.BLAS is one).
type sgemmer interface {
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
		b []float32, ldb int, beta float32, c []float32, ldc int) error
}

// deviceLinear runs each weight product as one Sgemm of a device, whole
// (not split by rows: the device parallelises it), keeping the first error.
type deviceLinear struct {
	dev sgemmer
	err error
}

func (d *deviceLinear) NT(dst, x, w []float32, n, in, out int, accumulate bool) {
	d.gemm(false, true, n, out, in, x, in, w, in, accumulate, dst, out)
}

func (d *deviceLinear) NN(dst, dy, w []float32, n, in, out int, accumulate bool) {
	d.gemm(false, false, n, in, out, dy, out, w, in, accumulate, dst, in)
}

func (d *deviceLinear) TNAdd(dw, dy, x []float32, n, in, out int) {
	d.gemm(true, false, out, in, n, dy, out, x, in, true, dw, in)
}

func (d *deviceLinear) Err() error {
	err := d.err
	d.err = nil
	return err
}

// gemm computes c = op(a)·op(b) (+ c when accumulate), unless an earlier
// product failed.
func (d *deviceLinear) gemm(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, accumulate bool, c []float32, ldc int) {
	if d.err != nil || m == 0 || n == 0 {
		return
	}
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	d.err = d.dev.Sgemm(tA, tB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
}
