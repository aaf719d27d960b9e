//go:build cuda || cudaemu

package gpu

import (
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// TestCUDANewModelOn: a model built on the device from host weights reads
// them back bit for bit and scores as the CPU model does (fp32 products:
// the contract's float32 tolerance).
func TestCUDANewModelOn(t *testing.T) {
	modelOnMatches(t, testCUDADevice(t, cuda.MathFP32), 1e-4)
}
