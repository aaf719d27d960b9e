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

// BLAS is a cuBLAS handle with its own CUDA context on one device, and
// the device buffers its products reuse (grown when a larger product
// comes, freed by Close). Calls are serialised; each runs on a locked OS
// thread with the context current. A failed product returns its error and
// the next one starts on a fresh cuBLAS handle.
type BLAS struct {
	mu      sync.Mutex
	ctx     cu.CUContext
	impl    *cublas.Standard
	a, b, c deviceBuffer
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
// like gonum's blas32.Gemm. Operands are copied to the device (C only when
// beta ≠ 0) and C back, so it pays off only for large products.
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
	if err := b.a.upload(a[:na]); err != nil {
		return fmt.Errorf("cuda: sgemm: A: %w", err)
	}
	if err := b.b.upload(bm[:nb]); err != nil {
		return fmt.Errorf("cuda: sgemm: B: %w", err)
	}
	if beta == 0 {
		err = b.c.reserve(nc) // cuBLAS does not read C when beta is 0
	} else {
		err = b.c.upload(c[:nc])
	}
	if err != nil {
		return fmt.Errorf("cuda: sgemm: C: %w", err)
	}
	p := product{transA: transA, transB: transB, m: m, n: n, k: k, lda: lda, ldb: ldb, ldc: ldc}.columnMajor()
	b.impl.Sgemm(transpose(p.transA), transpose(p.transB), p.m, p.n, p.k,
		alpha, b.b.slice(nb), p.lda, b.a.slice(na), p.ldb, beta, b.c.slice(nc), p.ldc)
	if err := b.impl.Err(); err != nil {
		b.renewHandle()
		return fmt.Errorf("cuda: sgemm: %w", err)
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&c[0]), b.c.ptr, int64(4*nc)); err != nil {
		return fmt.Errorf("cuda: sgemm: copy C back: %w", err)
	}
	return nil
}

// renewHandle replaces the cuBLAS handle after an error, which cu/blas
// keeps for the life of a handle. If a new handle cannot be made, the old
// one stays and later products keep failing with its error.
func (b *BLAS) renewHandle() {
	impl := &cublas.Standard{}
	if impl.Init() != nil {
		return
	}
	b.impl.Close()
	b.impl = impl
}

// Close frees the buffers and destroys the cuBLAS handle and the context.
func (b *BLAS) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: close: %w", err)
	}
	for _, buf := range []*deviceBuffer{&b.a, &b.b, &b.c} {
		buf.free()
	}
	if err := b.impl.Close(); err != nil {
		return fmt.Errorf("cuda: close cublas: %w", err)
	}
	if err := b.ctx.Destroy(); err != nil {
		return fmt.Errorf("cuda: close context: %w", err)
	}
	return nil
}

// deviceBuffer is device memory for float32s that grows and is reused.
type deviceBuffer struct {
	ptr cu.DevicePtr
	n   int // capacity in float32s
}

// reserve makes room for n float32s, keeping the memory if it is enough.
func (d *deviceBuffer) reserve(n int) error {
	if n <= d.n {
		return nil
	}
	d.free()
	bytes := int64(4 * n)
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return fmt.Errorf("allocate %d bytes: %w", bytes, err)
	}
	d.ptr, d.n = p, n
	return nil
}

// upload copies host to the start of the buffer (synchronous).
func (d *deviceBuffer) upload(host []float32) error {
	if err := d.reserve(len(host)); err != nil {
		return err
	}
	bytes := int64(4 * len(host))
	if err := cu.MemcpyHtoD(d.ptr, unsafe.Pointer(&host[0]), bytes); err != nil {
		return fmt.Errorf("copy %d bytes to device: %w", bytes, err)
	}
	return nil
}

func (d *deviceBuffer) free() {
	if d.ptr != 0 {
		cu.MemFree(d.ptr)
	}
	d.ptr, d.n = 0, 0
}

// slice views the first n float32s of the buffer as a slice, the form
// cu/blas takes (it passes &s[0] to cuBLAS). The slice holds a device
// address: it must never be read or written from Go.
func (d *deviceBuffer) slice(n int) []float32 {
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&d.ptr))
	return unsafe.Slice((*float32)(ptr), n)
}

// transpose maps a flag to gonum's blas.Transpose, which cu/blas takes.
func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
