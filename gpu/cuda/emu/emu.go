//go:build cudaemu

package emu

import (
	"fmt"
	"sync"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// maxShared is the dynamic shared memory a launch may ask for: an H100's
// opt-in limit per block (the device runtime raises a kernel's limit when a
// launch needs more than the default 48 KiB).
const maxShared = 227 << 10

// Runtime is the emulated device. Its methods are safe for concurrent use;
// launches run one at a time, each on the calling goroutine's thread.
type Runtime struct {
	mu    sync.Mutex
	heap  heap
	total int64
}

var _ cuda.Runtime = (*Runtime)(nil)

// New returns an emulated device with total bytes of memory (0: 80 GiB, an
// H100's). Allocations are host memory mapped on demand, so a large total
// costs nothing until used.
func New(total int64) *Runtime {
	if total <= 0 {
		total = 80 << 30
	}
	return &Runtime{total: total}
}

// Device describes the emulator as an sm_90 device.
func (r *Runtime) Device() cuda.Device {
	return cuda.Device{Name: "mgrpo CPU emulator", TotalMemory: r.total, ComputeMajor: 9, ComputeMinor: 0}
}

// MemInfo returns the total less what is allocated, and the total.
func (r *Runtime) MemInfo() (free, total int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total - r.heap.used, r.total, nil
}

// Alloc maps bytes of memory, refusing more than MemInfo's free.
func (r *Runtime) Alloc(bytes int64) (cuda.Ptr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes > r.total-r.heap.used {
		return 0, fmt.Errorf("emu: alloc %d bytes: out of memory (%d of %d free)", bytes, r.total-r.heap.used, r.total)
	}
	return r.heap.alloc(bytes)
}

// Free unmaps an allocation.
func (r *Runtime) Free(p cuda.Ptr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heap.free(p)
}

// Upload copies src to dst.
func (r *Runtime) Upload(dst cuda.Ptr, src []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.heap.bytes(dst, int64(len(src)))
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	copy(d, src)
	return nil
}

// Download copies len(dst) bytes from src.
func (r *Runtime) Download(dst []byte, src cuda.Ptr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.heap.bytes(src, int64(len(dst)))
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	copy(dst, s)
	return nil
}

// Copy copies bytes from src to dst.
func (r *Runtime) Copy(dst, src cuda.Ptr, bytes int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.heap.bytes(dst, bytes)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	s, err := r.heap.bytes(src, bytes)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	copy(d, s)
	return nil
}

// Memset sets bytes bytes at dst to value.
func (r *Runtime) Memset(dst cuda.Ptr, value byte, bytes int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.heap.bytes(dst, bytes)
	if err != nil {
		return fmt.Errorf("memset: %w", err)
	}
	for i := range d {
		d[i] = value
	}
	return nil
}

// Launch runs a kernel of package kernels on the CPU, after checking the
// shape, the arguments' kinds and that every pointer argument points into
// an allocation.
func (r *Runtime) Launch(name string, grid, block cuda.Dim3, shared int, args ...any) error {
	if err := cuda.CheckLaunch(name, grid, block, shared, maxShared); err != nil {
		return err
	}
	slots, kinds, err := cuda.Args(args...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.mu.Lock()
	for i, k := range kinds {
		if k == 'p' && !r.heap.contains(cuda.Ptr(slots[i])) {
			r.mu.Unlock()
			return fmt.Errorf("%w: %s: argument %d (%#x) is not device memory", cuda.ErrLaunch, name, i, slots[i])
		}
	}
	r.mu.Unlock()
	return kernels.Emulate(name, grid, block, shared, slots, kinds)
}

// Gemm computes the product on the CPU (see gemm).
func (r *Runtime) Gemm(g cuda.Gemm) error {
	if err := g.Check(); err != nil {
		return err
	}
	if g.Empty() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, b, c := operands(g)
	for _, op := range []struct {
		m   *matrix
		at  cuda.Ptr
		use bool
	}{{&a, g.A, g.K > 0}, {&b, g.B, g.K > 0}, {&c, g.C, true}} {
		if !op.use {
			continue
		}
		mem, err := r.heap.bytes(op.at, op.m.extent(g.Count())*op.m.elemSize())
		if err != nil {
			return fmt.Errorf("gemm: %w", err)
		}
		op.m.mem = mem
	}
	for i := range g.Count() {
		gemm(g, a, b, c, i)
	}
	return nil
}

// Synchronize returns nil: every call has finished when it returns.
func (r *Runtime) Synchronize() error { return nil }

// Close frees every allocation left.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.heap.list) > 0 {
		if err := r.heap.free(r.heap.list[0].base); err != nil {
			return err
		}
	}
	return nil
}
