//go:build cuda || cudaemu

package gpu

import (
	"slices"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// TestCUDANewModelOn: a model built on the device from host weights reads
// them back bit for bit and scores as the CPU model does (fp32 products:
// the contract's float32 tolerance).
func TestCUDANewModelOn(t *testing.T) {
	modelOnMatches(t, testCUDADevice(t, cuda.MathFP32), 1e-4)
}

// TestCUDAModelOn: Model.On leaves a model on its device and copies one
// from elsewhere, weights bit for bit, version kept; DType is the device's.
func TestCUDAModelOn(t *testing.T) {
	dev := testCUDADevice(t, cuda.MathBF16)
	cfg, _ := Preset("tiny")
	src, err := NewModel(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	src.version = 4
	m, err := src.On(dev)
	if err != nil {
		t.Fatal(err)
	}
	if m == src || m.Version() != 4 || !slices.Equal(m.Weights(), src.Weights()) || m.DType() != DTypeBF16 {
		t.Errorf("On(cuda): same %v, version %d, dtype %s; want a bf16 copy at version 4", m == src, m.Version(), m.DType())
	}
	if again, err := m.On(dev); again != m || err != nil {
		t.Errorf("On(its own device) = %p, %v; want the model itself", again, err)
	}
	host, err := m.On(CPU{})
	if err != nil || host == m || !slices.Equal(host.Weights(), src.Weights()) || host.DType() != DTypeFloat32 {
		t.Errorf("On(cpu): %v, dtype %s", err, host.DType())
	}
}
