//go:build cuda || cudaemu

package gpu

import (
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
)

// The CUDA engine (cuda_engine.go) on the runtime of the build: the CPU
// emulator with -tags cudaemu (here, in make test), GPU 0 with -tags cuda.

// testCUDADevice is a cuda device over the build's runtime whose products
// run in math.
func testCUDADevice(t *testing.T, math cuda.Math) *cudaDevice {
	return newCUDADevice(cudatest.Open(t), math, false)
}

func TestCUDAEngineContract(t *testing.T) {
	for _, tc := range []struct {
		math cuda.Math
		tol  float64
	}{
		{cuda.MathFP32, 1e-4},
	} {
		t.Run(tc.math.String(), func(t *testing.T) {
			runEngineContract(t, engineContract{dev: testCUDADevice(t, tc.math), tol: tc.tol})
		})
	}
}
