package gpu

import (
	"errors"
	"fmt"
	"os"
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

// Device is a compute device: it makes the engines that hold a model's
// weights and run its passes (engine.go). A Learner trains on the
// Engine of LearnerConfig.Device; Models made by NewModel, LoadModel and
// NewModelFromWeights run on the CPU's ModelEngine, a Learner's snapshots
// on its device's. On "cuda" the Engine keeps weights, gradients, AdamW
// moments and activations on the GPU (docs/ENGINE.md), and snapshots are
// copies on the GPU.
type Device interface {
	// Name is "cpu" or "cuda".
	Name() string
	// Info describes the device for logs and `mgrpo-node bench`, e.g.
	// "cpu: 2 threads, BLAS OpenBLAS (SkylakeX kernels, ...)".
	Info() string
	// Close releases what the device holds (a CUDA context and its
	// buffers); learners using it must not step afterwards.
	Close() error
	// newEngine returns a trainable engine over a copy of w (flat,
	// TensorNames order; read only) with lc's optimiser settings, after
	// checking that it fits in the device's memory.
	newEngine(cfg Config, w []float32, lc LearnerConfig) (Engine, error)
	// newModelEngine returns an immutable engine over w, which it takes
	// (it keeps it, or drops it once copied to the device).
	newModelEngine(cfg Config, w []float32) (ModelEngine, error)
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

func (CPU) newEngine(cfg Config, w []float32, lc LearnerConfig) (Engine, error) {
	return newCPUEngine(cfg, w, lc, nil)
}

func (CPU) newModelEngine(cfg Config, w []float32) (ModelEngine, error) {
	return newCPUModel(cfg, w, nil), nil
}

// The precisions of a device's matrix products (DeviceOptions.DType).
const (
	// DTypeFloat32 is the default: fp32 weights, activations and
	// products. On cuda the products run on the tensor cores in TF32
	// (fp32 inputs rounded to a 10-bit mantissa, fp32 sums), as PyTorch
	// with allow_tf32.
	DTypeFloat32 = "float32"
	// DTypeBF16 is mixed precision, as PyTorch's bf16 autocast: the
	// products take bf16 inputs (the weights' bf16 copy, refreshed after
	// every update, and the activations rounded) and sum in fp32; master
	// weights, gradients, the optimiser and everything else stay fp32.
	// cuda only.
	DTypeBF16 = "bf16"
)

// The attention kernels of the CUDA engine (DeviceOptions.Attention).
const (
	// AttentionAuto, the default: AttentionTensor where the head width
	// has tensor-core kernels (32, 64, 128) and the GPU tensor cores for
	// the products' precision (compute capability 8.0 on), else
	// AttentionCUDACore.
	AttentionAuto = "auto"
	// AttentionTensor: q·kᵀ, p·v and their backward products on the
	// tensor cores in the products' precision (TF32 or bf16) with fp32
	// sums, softmax in fp32; a GPU without such tensor cores is refused,
	// a head width without such kernels (16) stays on the CUDA cores.
	AttentionTensor = "tensor"
	// AttentionCUDACore: attention in fp32 on the CUDA cores.
	AttentionCUDACore = "cuda-core"
)

// AttentionEnv is the environment variable that overrides
// DeviceOptions.Attention (how a benchmark script compares the kernels).
const AttentionEnv = "MGRPO_CUDA_ATTENTION"

// DeviceOptions configure OpenDeviceWith.
type DeviceOptions struct {
	// DType is the precision of the products: "" (DTypeFloat32),
	// DTypeFloat32 or DTypeBF16 (cuda only).
	DType string
	// Attention picks the CUDA engine's attention kernels: "" (AttentionAuto),
	// AttentionAuto, AttentionTensor or AttentionCUDACore; the environment
	// variable MGRPO_CUDA_ATTENTION, when set, overrides it. cuda only.
	Attention string
}

// ProbeCUDA describes the GPU that OpenDevice("cuda") would open, e.g.
// "GPU 0: NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)", without opening it
// (no context, no kernels compiled: quick): what `mgrpo-node device-check`
// prints before a run is handed to the cuda binary. Its error matches
// ErrNoDevice: no GPU, or a binary built without CUDA (CUDABuilt).
func ProbeCUDA() (string, error) { return probeCUDA() }

// OpenDevice returns the named device: "cpu", or "cuda" (GPU 0, or the
// first of CUDA_VISIBLE_DEVICES) in a binary built with -tags cuda, with
// the default precision. Close it when done.
func OpenDevice(name string) (Device, error) { return OpenDeviceWith(name, DeviceOptions{}) }

// OpenDeviceWith is OpenDevice with options: the precision of the
// products (DeviceOptions.DType).
func OpenDeviceWith(name string, o DeviceOptions) (Device, error) {
	switch o.DType {
	case "", DTypeFloat32:
		o.DType = DTypeFloat32
	case DTypeBF16:
		if name != "cuda" {
			return nil, &noDevice{name: name, why: "dtype bf16 needs the cuda device (the CPU computes in float32)"}
		}
	default:
		return nil, &noDevice{name: name, why: fmt.Sprintf("unknown dtype %q: want %s or %s", o.DType, DTypeFloat32, DTypeBF16)}
	}
	if v := os.Getenv(AttentionEnv); v != "" && name == "cuda" {
		o.Attention = v
	}
	switch o.Attention {
	case "", AttentionAuto, AttentionTensor, AttentionCUDACore:
	default:
		return nil, &noDevice{name: name, why: fmt.Sprintf("unknown attention kernels %q (option or %s): want %s, %s or %s",
			o.Attention, AttentionEnv, AttentionAuto, AttentionTensor, AttentionCUDACore)}
	}
	switch name {
	case "cpu", "":
		return CPU{}, nil
	case "cuda":
		return openCUDA(o)
	}
	return nil, &noDevice{name: name, why: "unknown device: want cpu or cuda"}
}
