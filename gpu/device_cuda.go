//go:build cuda

package gpu

import (
	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// openCUDA opens GPU 0 (the first of CUDA_VISIBLE_DEVICES) with the
// kernels compiled for it (NVRTC, seconds) and returns the CUDA device:
// its engines keep the whole learner on the GPU (cuda_engine.go).
func openCUDA(o DeviceOptions) (Device, error) {
	devs, err := cuda.Devices()
	if err != nil {
		return nil, &noDevice{name: "cuda", why: "list devices", cause: err}
	}
	if len(devs) == 0 {
		return nil, &noDevice{name: "cuda", why: "no CUDA device found"}
	}
	rt, err := cuda.Open(devs[0].Ordinal, kernels.Program())
	if err != nil {
		return nil, &noDevice{name: "cuda", why: "open " + devs[0].String(), cause: err}
	}
	d := newCUDADevice(rt, cudaMath(o.DType), true)
	if d.attn, err = attentionMath(o.Attention, d.math, rt.Device()); err != nil {
		rt.Close()
		return nil, &noDevice{name: "cuda", why: devs[0].String(), cause: err}
	}
	return d, nil
}
