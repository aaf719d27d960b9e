//go:build cuda

package gpu

import (
	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// CUDABuilt reports whether OpenDevice("cuda") can open a device in this
// binary: true, it was built with the cuda tag (it starts only where the
// NVIDIA driver is: gorgonia.org/cu initialises it before main).
const CUDABuilt = true

// openCUDA opens GPU 0 (the first of CUDA_VISIBLE_DEVICES) with the
// kernels compiled for it (NVRTC, seconds) and returns the CUDA device:
// its engines keep the whole learner on the GPU (cuda_engine.go).
func openCUDA(o DeviceOptions) (Device, error) {
	dev, err := firstGPU()
	if err != nil {
		return nil, err
	}
	rt, err := cuda.Open(dev.Ordinal, kernels.Program())
	if err != nil {
		return nil, &noDevice{name: "cuda", why: "open " + dev.String(), cause: err}
	}
	d := newCUDADevice(rt, cudaMath(o.DType), true)
	if d.attn, err = attentionMath(o.Attention, d.math, rt.Device()); err != nil {
		rt.Close()
		return nil, &noDevice{name: "cuda", why: dev.String(), cause: err}
	}
	return d, nil
}

// firstGPU describes the GPU openCUDA opens.
func firstGPU() (cuda.Device, error) {
	devs, err := cuda.Devices()
	if err != nil {
		return cuda.Device{}, &noDevice{name: "cuda", why: "list devices", cause: err}
	}
	if len(devs) == 0 {
		return cuda.Device{}, &noDevice{name: "cuda", why: "no CUDA device found"}
	}
	return devs[0], nil
}

func probeCUDA() (string, error) {
	dev, err := firstGPU()
	return dev.String(), err
}
