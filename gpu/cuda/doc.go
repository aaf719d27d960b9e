// Package cuda is mgrpo's optional NVIDIA GPU support: device discovery and
// a cuBLAS single-precision matrix product (Sgemm) that a Learner's weight
// products run on.
//
// The real implementation (cuda.go) is compiled only with the build tag
// `cuda` and imports gorgonia.org/cu and gorgonia.org/cu/blas (cgo, CUDA
// headers and libcuda/libcublas needed). Note that cu's package init calls
// cuInit and exits the process when no driver is present, so a binary built
// with -tags cuda only starts on a machine with a GPU. Without the tag
// (nocuda.go, the default) the same API compiles with no cgo and no CUDA
// import: Available reports false, and Devices and NewBLAS return
// ErrNoCUDA.
//
// A Learner uses it through gpu.OpenDevice("cuda"): its weight products
// become BLAS.Sgemm calls.
//
// Matrices are row-major, as in gonum's blas32 and the rest of mgrpo; the
// cuBLAS wrapper maps them onto cuBLAS's column-major convention.
//
// The default build imports only the standard library; no build imports
// the model, actors or messages.
//
// Example:
//
//	if !cuda.Available() { /* CPU engine */ }
//	devs, err := cuda.Devices()
//	blas, err := cuda.NewBLAS(0)
//	defer blas.Close()
//	err = blas.Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n) // C = A·Bᵀ
package cuda
