//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// cudaDevice makes the CUDA engines (cuda_engine.go, cuda_model.go) over
// one cuda.Runtime: GPU 0 in a -tags cuda build (openCUDA), or the CPU
// emulator in a test of a -tags cudaemu build (newCUDADevice), which runs
// the very same engine code. Its engines free their device memory when
// they are garbage collected; a device that runs short of memory first
// collects the engines nobody holds any more (reclaim).
type cudaDevice struct {
	rt   cuda.Runtime
	math cuda.Math // of the weight products: MathTF32 (DTypeFloat32), MathBF16, or MathFP32 (tests)
	attn cuda.Math // of attention's products: math on the tensor cores, or MathFP32 on the CUDA cores (attentionMath)
	owns bool      // Close closes rt

	mu     sync.Mutex // guards closed
	closed bool
}

var _ Device = (*cudaDevice)(nil)

// newCUDADevice returns a device over rt whose products run in math,
// attention on the kernels AttentionAuto picks. With owns, Close closes rt.
func newCUDADevice(rt cuda.Runtime, math cuda.Math, owns bool) *cudaDevice {
	attn, _ := attentionMath(AttentionAuto, math, rt.Device()) // auto never refuses
	return &cudaDevice{rt: rt, math: math, attn: attn, owns: owns}
}

// attentionMath is the precision of attention's products for a
// DeviceOptions.Attention choice: the products' math on the tensor cores
// (TF32 or bf16, on a GPU of compute capability 8.0 on), else MathFP32,
// the CUDA-core kernels; AttentionTensor where the tensor cores cannot
// run it is an error. A head width without tensor-core kernels runs on
// the CUDA cores whatever this says (cudaPass.attnShape).
func attentionMath(choice string, math cuda.Math, dev cuda.Device) (cuda.Math, error) {
	tensor := math != cuda.MathFP32 && dev.ComputeMajor >= 8
	switch {
	case choice == AttentionTensor && !tensor:
		return 0, fmt.Errorf("tensor-core attention needs TF32 or bf16 products on a GPU of compute capability 8.0 or later (%s products, %d.%d)",
			math, dev.ComputeMajor, dev.ComputeMinor)
	case choice == AttentionCUDACore || !tensor:
		return cuda.MathFP32, nil
	}
	return math, nil
}

// cudaMath is the product precision of a DType on cuda: TF32 tensor cores
// for float32 (as PyTorch with allow_tf32), bf16 inputs with fp32 sums
// for bf16.
func cudaMath(dtype string) cuda.Math {
	if dtype == DTypeBF16 {
		return cuda.MathBF16
	}
	return cuda.MathTF32
}

// Name returns "cuda".
func (d *cudaDevice) Name() string { return "cuda" }

// Info names the GPU, the precision of the products and the attention
// kernels.
func (d *cudaDevice) Info() string {
	attn := "fp32 on the CUDA cores"
	if d.attn != cuda.MathFP32 {
		attn = fmt.Sprintf("%s on the tensor cores (head widths 32, 64, 128)", d.attn)
	}
	return fmt.Sprintf("cuda: %s; learner, sampling and scoring on the device, %s products (%s), attention %s", d.rt.Device(), d.math, d.dtype(), attn)
}

// dtype is the DType the device's precision stands for.
func (d *cudaDevice) dtype() string {
	if d.math == cuda.MathBF16 {
		return DTypeBF16
	}
	return DTypeFloat32
}

// Close ends the device: engines made by it must not be used afterwards
// (their memory goes with the runtime).
func (d *cudaDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.owns {
		return d.rt.Close()
	}
	return nil
}

func (d *cudaDevice) newEngine(cfg Config, w []float32, lc LearnerConfig) (Engine, error) {
	return newCUDAEngine(d, cfg, w, lc)
}

func (d *cudaDevice) newModelEngine(cfg Config, w []float32) (ModelEngine, error) {
	return newCUDAModelFromHost(d, cfg, w)
}

// free releases ptrs unless the device is closed (its runtime then freed
// everything, or will).
func (d *cudaDevice) free(ptrs []cuda.Ptr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	for _, p := range ptrs {
		d.rt.Free(p)
	}
}

// reclaim runs the garbage collector so that engines nobody holds free
// their device memory (their cleanups run on a goroutine of their own
// after the collection: give them a moment).
func (d *cudaDevice) reclaim() {
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}

// checkFree refuses, before anything is allocated, what needs more device
// memory than is free (after reclaiming what unreachable engines hold),
// with one line naming what, how much it needs and how much is free.
func (d *cudaDevice) checkFree(what string, need int64) error {
	free, total, err := d.rt.MemInfo()
	if err != nil {
		return fmt.Errorf("%s: device memory: %w", what, err)
	}
	if need <= free {
		return nil
	}
	d.reclaim()
	if free, _, err = d.rt.MemInfo(); err != nil || need <= free {
		return err
	}
	return fmt.Errorf("%w: %s needs %s of GPU memory; %s of %s is free on %s", ErrMemory, what,
		formatBytes(float64(need)), formatBytes(float64(free)), formatBytes(float64(total)), d.rt.Device().Name)
}

// arena is a set of device buffers allocated and freed together (an
// engine's weights and optimiser state, a workspace). With a nil device it
// only adds up the bytes its buffers would take: the same code sizes a
// workspace before checking it fits and then allocates it.
type arena struct {
	dev   *cudaDevice
	ptrs  []cuda.Ptr
	bytes int64
	err   error // the first allocation error
}

// arenaAlign is the granularity the sizes are counted in (the device
// allocator's is at least this).
const arenaAlign = 256

func (a *arena) take(bytes int64) cuda.Ptr {
	bytes = (max(bytes, 1) + arenaAlign - 1) / arenaAlign * arenaAlign
	a.bytes += bytes
	if a.dev == nil || a.err != nil {
		return 0
	}
	p, err := a.dev.rt.Alloc(bytes)
	if err != nil {
		a.dev.reclaim()
		if p, err = a.dev.rt.Alloc(bytes); err != nil {
			a.err = fmt.Errorf("%w: allocate %s of GPU memory: %w", ErrMemory, formatBytes(float64(bytes)), err)
			return 0
		}
	}
	a.ptrs = append(a.ptrs, p)
	return p
}

func (a *arena) f32(n int) cuda.Ptr  { return a.take(4 * int64(n)) }
func (a *arena) i32(n int) cuda.Ptr  { return a.take(4 * int64(n)) }
func (a *arena) f64(n int) cuda.Ptr  { return a.take(8 * int64(n)) }
func (a *arena) bf16(n int) cuda.Ptr { return a.take(2 * int64(n)) }

// release frees every buffer and empties the arena for reuse.
func (a *arena) release() {
	if a.dev != nil {
		a.dev.free(a.ptrs)
	}
	a.ptrs, a.bytes, a.err = nil, 0, nil
}

// releaseAll is the cleanup of an engine: it frees its arenas.
func releaseAll(arenas []*arena) {
	for _, a := range arenas {
		a.release()
	}
}

// f32At is element off of a float32 buffer; bf16At of a bf16 one.
func f32At(p cuda.Ptr, off int) cuda.Ptr { return p.Add(4 * off) }
func bf16At(p cuda.Ptr, off int) cuda.Ptr {
	if p == 0 {
		return 0
	}
	return p.Add(2 * off)
}
