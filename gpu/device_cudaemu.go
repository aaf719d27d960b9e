//go:build cudaemu && !cuda

package gpu

import (
	"github.com/mgrpo/mgrpo/gpu/cuda/emu"
)

// CUDABuilt reports whether OpenDevice("cuda") can open a device in this
// binary: true in a cudaemu build, where it opens the CPU emulator.
const CUDABuilt = true

// openCUDA opens the CPU emulator of a GPU (an 80 GiB sm_90 device): a
// cudaemu build is for tests, which run the whole wiring on the very same
// CUDA engine code as a cuda build, slowly. The production builds are
// untouched: a cuda build opens GPU 0 (device_cuda.go), the default one
// refuses (device_nocuda.go).
func openCUDA(o DeviceOptions) (Device, error) {
	rt := emu.New(0)
	d := newCUDADevice(rt, cudaMath(o.DType), true)
	var err error
	if d.attn, err = attentionMath(o.Attention, d.math, rt.Device()); err != nil {
		rt.Close()
		return nil, &noDevice{name: "cuda", why: rt.Device().String(), cause: err}
	}
	return d, nil
}

func probeCUDA() (string, error) { return emu.New(0).Device().String(), nil }
