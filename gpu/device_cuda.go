//go:build cuda

package gpu

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// cudaDevice is GPU 0 with a cuBLAS handle: a Learner on it runs its
// weight products as cuBLAS Sgemm (operands copied over per product, so it
// pays off for the larger presets and batches) and the rest of the model
// on the CPU.
type cudaDevice struct {
	gpu  cuda.Device
	blas *cuda.BLAS
}

func openCUDA() (Device, error) {
	devs, err := cuda.Devices()
	if err != nil {
		return nil, &noDevice{name: "cuda", why: "list devices", cause: err}
	}
	if len(devs) == 0 {
		return nil, &noDevice{name: "cuda", why: "no CUDA device found"}
	}
	b, err := cuda.NewBLAS(devs[0].Ordinal)
	if err != nil {
		return nil, &noDevice{name: "cuda", why: "open " + devs[0].String(), cause: err}
	}
	return &cudaDevice{gpu: devs[0], blas: b}, nil
}

func (d *cudaDevice) Name() string { return "cuda" }

func (d *cudaDevice) Info() string {
	return fmt.Sprintf("cuda: %s, cuBLAS for the weight products; %s for the rest", d.gpu, CPU{}.Info())
}

func (d *cudaDevice) Close() error { return d.blas.Close() }

func (d *cudaDevice) linear32(int) linear[float32] { return &deviceLinear{dev: d.blas} }
