//go:build !cuda

package cuda

// Available reports whether a CUDA device can be used: always false in a
// build without the cuda tag.
func Available() bool { return false }

// Devices returns ErrNoCUDA in a build without the cuda tag.
func Devices() ([]Device, error) { return nil, ErrNoCUDA }

// BLAS is a cuBLAS handle bound to one device; in a build without the cuda
// tag it cannot be created.
type BLAS struct{}

// NewBLAS returns ErrNoCUDA in a build without the cuda tag.
func NewBLAS(ordinal int) (*BLAS, error) { return nil, ErrNoCUDA }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on the GPU (row-major);
// it returns ErrNoCUDA in a build without the cuda tag.
func (*BLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) error {
	return ErrNoCUDA
}

// Close releases the handle; a no-op without the cuda tag.
func (*BLAS) Close() error { return nil }
