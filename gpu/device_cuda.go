//go:build cuda

package gpu

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// cudaDevice is GPU 0 with a cuBLAS handle. Until the CUDA engine
// replaces it, its Engine is the CPU engine with the weight products as
// cuBLAS Sgemm (operands copied over per product, so it pays off only for
// the larger presets and batches), and its models are CPU models.
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

func (d *cudaDevice) newEngine(cfg Config, w []float32, lc LearnerConfig) (Engine, error) {
	return newCPUEngine(cfg, w, lc, &deviceLinear{dev: d.blas})
}

func (d *cudaDevice) newModelEngine(cfg Config, w []float32) (ModelEngine, error) {
	return CPU{}.newModelEngine(cfg, w)
}
