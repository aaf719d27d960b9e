package gpu

import (
	"errors"
	"fmt"
	"runtime"
)

// ErrNoDevice is returned (wrapped) by OpenDevice for a device this binary
// cannot use.
var ErrNoDevice = errors.New("gpu: device not available")

// Device is the compute device the model runs on: the seam where a CUDA
// engine goes. Today every kernel runs on the CPU.
type Device interface {
	// Name is "cpu" or "cuda".
	Name() string
	// Info describes the device for logs and `mgrpo-node bench`, e.g.
	// "cpu: 2 threads, BLAS OpenBLAS (SkylakeX kernels, ...)".
	Info() string
}

// CPU is the default device: Go kernels on GOMAXPROCS goroutines and the
// BLAS chosen at build time (BLASName) for matrix products.
type CPU struct{}

var _ Device = CPU{}

// Name returns "cpu".
func (CPU) Name() string { return "cpu" }

// Info names the thread count and the BLAS.
func (CPU) Info() string {
	return fmt.Sprintf("cpu: %d threads, BLAS %s", runtime.GOMAXPROCS(0), BLASInfo())
}

// OpenDevice returns the named device: "cpu", or "cuda" in a binary built
// with -tags cuda.
func OpenDevice(name string) (Device, error) {
	switch name {
	case "cpu", "":
		return CPU{}, nil
	case "cuda":
		return openCUDA()
	}
	return nil, fmt.Errorf("device %s: %w: want cpu or cuda", name, ErrNoDevice)
}
