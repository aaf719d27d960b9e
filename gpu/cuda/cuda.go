//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gorgonia.org/cu"
	cublas "gorgonia.org/cu/blas"
)

// Available reports whether at least one CUDA device is present.
func Available() bool {
	n, err := cu.NumDevices()
	return err == nil && n > 0
}

// Devices lists the CUDA devices with their name, memory and compute
// capability.
func Devices() ([]Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: count devices: %w", err)
	}
	devs := make([]Device, 0, n)
	for i := range n {
		d, err := describe(i)
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// describe queries one device.
func describe(ordinal int) (Device, error) {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return Device{}, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	name, err := dev.Name()
	if err != nil {
		return Device{}, fmt.Errorf("cuda: device %d name: %w", ordinal, err)
	}
	mem, err := dev.TotalMem()
	if err != nil {
		return Device{}, fmt.Errorf("cuda: device %d memory: %w", ordinal, err)
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return Device{}, fmt.Errorf("cuda: device %d compute capability: %w", ordinal, err)
	}
	return Device{Ordinal: ordinal, Name: name, TotalMemory: mem, ComputeMajor: major, ComputeMinor: minor}, nil
}

// BLAS is a cuBLAS handle with its own CUDA context on one device. Calls
// are serialised; each runs on a locked OS thread with the context
// current. After a cuBLAS error the handle is unusable (cu/blas keeps the
// error): Close it and make a new one.
type BLAS struct {
	mu   sync.Mutex
	ctx  cu.CUContext
	impl *cublas.Standard
}

// NewBLAS creates a context on device ordinal and a cuBLAS handle in it.
func NewBLAS(ordinal int) (*BLAS, error) {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := dev.MakeContext(cu.SchedAuto) // also makes it current
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: create context: %w", ordinal, err)
	}
	impl := &cublas.Standard{}
	if err := impl.Init(); err != nil {
		ctx.Destroy()
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	return &BLAS{ctx: ctx, impl: impl}, nil
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major host
// matrices (op(A) m×k, op(B) k×n, C m×n, leading dimensions lda, ldb, ldc),
// like gonum's blas32.Gemm. Operands are copied to the device and C back,
// so it pays off only for large products.
func (b *BLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	bm []float32, ldb int, beta float32, c []float32, ldc int) error {
	na, nb, nc, err := gemmSizes(transA, transB, m, n, k, a, lda, bm, ldb, c, ldc)
	if err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: sgemm: set context: %w", err)
	}
	var bufs [3]cu.DevicePtr
	defer func() {
		for _, p := range bufs {
			if p != 0 {
				cu.MemFree(p)
			}
		}
	}()
	for i, host := range [][]float32{a[:na], bm[:nb], c[:nc]} {
		if bufs[i], err = toDevice(host); err != nil {
			return fmt.Errorf("cuda: sgemm: %w", err)
		}
	}
	// Row-major X is column-major Xᵀ, so C = op(A)·op(B) is computed as the
	// column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ: operands swapped, flags kept.
	b.impl.Sgemm(transpose(transB), transpose(transA), n, m, k,
		alpha, devSlice(bufs[1], nb), ldb, devSlice(bufs[0], na), lda,
		beta, devSlice(bufs[2], nc), ldc)
	if err := b.impl.Err(); err != nil {
		return fmt.Errorf("cuda: sgemm: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("cuda: sgemm: synchronize: %w", err)
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&c[0]), bufs[2], int64(4*nc)); err != nil {
		return fmt.Errorf("cuda: sgemm: copy C back: %w", err)
	}
	return nil
}

// Close destroys the cuBLAS handle and the context.
func (b *BLAS) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: close: %w", err)
	}
	if err := b.impl.Close(); err != nil {
		return fmt.Errorf("cuda: close cublas: %w", err)
	}
	if err := b.ctx.Destroy(); err != nil {
		return fmt.Errorf("cuda: close context: %w", err)
	}
	return nil
}

// toDevice allocates device memory for host and copies it there.
func toDevice(host []float32) (cu.DevicePtr, error) {
	bytes := int64(4 * len(host))
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, fmt.Errorf("allocate %d bytes: %w", bytes, err)
	}
	if err := cu.MemcpyHtoD(p, unsafe.Pointer(&host[0]), bytes); err != nil {
		cu.MemFree(p)
		return 0, fmt.Errorf("copy %d bytes to device: %w", bytes, err)
	}
	return p, nil
}

// devSlice views n float32 of device memory as a slice, the form cu/blas
// takes (it passes &s[0] to cuBLAS). The slice must never be read or
// written from Go.
func devSlice(p cu.DevicePtr, n int) []float32 {
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p)) // device address, not Go memory
	return unsafe.Slice((*float32)(ptr), n)
}

// transpose maps a flag to gonum's blas.Transpose, which cu/blas takes.
func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
