package gpu

import (
	"errors"
	"fmt"
	"runtime"
)

// ErrNoDevice is what every OpenDevice error is (errors.Is): the device
// named cannot be used by this binary on this machine.
var ErrNoDevice = errors.New("gpu: device not available")

// noDevice is an OpenDevice error: "device NAME: why", matching
// ErrNoDevice, wrapping the cause if there is one.
type noDevice struct {
	name, why string
	cause     error
}

func (e *noDevice) Error() string {
	if e.cause != nil {
		return "device " + e.name + ": " + e.why + ": " + e.cause.Error()
	}
	return "device " + e.name + ": " + e.why
}

func (e *noDevice) Is(target error) bool { return target == ErrNoDevice }
func (e *noDevice) Unwrap() error        { return e.cause }

// Device is the compute device a Learner runs on (LearnerConfig.Device).
// On "cuda" the weight products of the forward and backward passes run as
// cuBLAS products on the GPU; everything else, and every Model (sampling
// and scoring), runs on the CPU.
type Device interface {
	// Name is "cpu" or "cuda".
	Name() string
	// Info describes the device for logs and `mgrpo-node bench`, e.g.
	// "cpu: 2 threads, BLAS OpenBLAS (SkylakeX kernels, ...)".
	Info() string
	// Close releases what the device holds (a CUDA context and its
	// buffers); learners using it must not step afterwards.
	Close() error
	// linear32 returns the engine of a float32 model's weight products;
	// workers is the model's CPU goroutine count.
	linear32(workers int) linear[float32]
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

// Close does nothing: the CPU holds nothing to release.
func (CPU) Close() error { return nil }

func (CPU) linear32(workers int) linear[float32] { return cpuLinear[float32]{workers: workers} }

// OpenDevice returns the named device: "cpu", or "cuda" (GPU 0, or the
// first of CUDA_VISIBLE_DEVICES) in a binary built with -tags cuda. Close
// it when done.
func OpenDevice(name string) (Device, error) {
	switch name {
	case "cpu", "":
		return CPU{}, nil
	case "cuda":
		return openCUDA()
	}
	return nil, &noDevice{name: name, why: "unknown device: want cpu or cuda"}
}
