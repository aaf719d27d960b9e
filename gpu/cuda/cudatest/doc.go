// Package cudatest helps tests run kernels on a cuda.Runtime: Open gives
// the runtime of the build (the CPU emulator with tag cudaemu, GPU 0 with
// tag cuda; one file per tag), and the other helpers move slices in and
// out, failing the test on error.
//
// Example (a test file with //go:build cuda || cudaemu):
//
//	rt := cudatest.Open(t)
//	x := cudatest.Upload(t, rt, []float32{1, 2, 3})
//	got := cudatest.Download[float32](t, rt, x, 3)
package cudatest
