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

// TestCUDAEngineContract runs the engine contract (engine_test.go) on
// the CUDA engine in each precision, with the tolerances its arithmetic
// earns against the float64 oracle (outputs relative to max(1, |x|),
// gradients to each tensor's largest), measured on the emulator:
//
//	fp32 (CUDA cores, tests only)  1e-4   worst 4.1e-5 (the GQA shape's k_proj)
//	TF32 (DTypeFloat32)            5e-3   worst 1.1e-4 outputs, 1.7e-3 gradients
//	bf16 (DTypeBF16)               3e-2   worst 1.1e-3 outputs, 1.1e-2 gradients
//
// TF32 and bf16 run it on Hugging Face-initialised weights (the
// contract's reduced mode): through the oracle's std-0.2 weights the
// inputs' rounding (2⁻¹¹ and 2⁻⁸) grows to 3e-2 and 3e-1.
func TestCUDAEngineContract(t *testing.T) {
	for _, tc := range []struct {
		math cuda.Math
		tol  float64
	}{
		{cuda.MathFP32, 1e-4}, {cuda.MathTF32, 5e-3}, {cuda.MathBF16, 3e-2},
	} {
		t.Run(tc.math.String(), func(t *testing.T) {
			runEngineContract(t, engineContract{dev: testCUDADevice(t, tc.math), tol: tc.tol, reduced: tc.math != cuda.MathFP32})
		})
	}
}
