//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// defaultShared is the dynamic shared memory a kernel may take without
// raising its limit.
const defaultShared = 48 << 10

// device is the Runtime of one GPU: its primary context (shared by every
// Runtime of the device in the process, so their memory is one address
// space), a stream of its own, the kernels of a Program compiled for it,
// and a cuBLAS handle on the stream. Calls are serialised, each on a
// locked OS thread with the context current.
type device struct {
	mu      sync.Mutex
	dev     cu.Device
	ctx     cu.CUContext
	stream  cu.Stream
	mod     cu.Module
	params  map[string][]string // each kernel's PTX parameter types
	fns     map[string]*kernel
	blas    *blasHandle
	info    Device
	optIn   int // the most dynamic shared memory a block may have
	started bool
}

// kernel is a loaded function and the shared memory limit set for it.
type kernel struct {
	fn     cu.Function
	shared int
}

// Open starts a Runtime on GPU ordinal: it compiles p with NVRTC for the
// device's compute capability and loads it (seconds, once per Runtime;
// with MGRPO_PTX_CACHE set, once per program in that directory).
func Open(ordinal int, p Program) (Runtime, error) {
	info, err := describe(ordinal)
	if err != nil {
		return nil, err
	}
	ptx, err := CompilePTXCached(p, info.ComputeMajor, info.ComputeMinor, os.Getenv(PTXCacheEnv))
	if err != nil {
		return nil, err
	}
	d := &device{info: info, params: PTXEntries(ptx), fns: map[string]*kernel{}}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.start(ordinal, ptx); err != nil {
		d.release()
		return nil, fmt.Errorf("cuda: open GPU %d: %w", ordinal, err)
	}
	return d, nil
}

// start retains the primary context and makes the stream, module and
// cuBLAS handle in it (on the caller's locked thread).
func (d *device) start(ordinal int, ptx string) error {
	var err error
	if d.dev, err = cu.GetDevice(ordinal); err != nil {
		return err
	}
	if d.ctx, err = d.dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("primary context: %w", err)
	}
	d.started = true
	if err = cu.SetCurrentContext(d.ctx); err != nil {
		return err
	}
	if d.optIn, err = sharedOptIn(d.dev); err != nil {
		return err
	}
	if d.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("load the kernels' PTX: %w", err)
	}
	d.blas, err = newBLASHandle(d.stream)
	return err
}

// release undoes start, as far as it got.
func (d *device) release() error {
	if !d.started {
		return nil
	}
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return err
	}
	if d.blas != nil {
		d.blas.close()
	}
	var zero cu.Module
	if d.mod != zero {
		d.mod.Unload()
	}
	var none cu.Stream
	if d.stream != none {
		d.stream.Destroy()
	}
	d.started = false
	return d.dev.ReleasePrimaryCtx()
}

// do runs f with the context current on a locked thread, one call at a
// time.
func (d *device) do(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("cuda: set context: %w", err)
	}
	return f()
}

func (d *device) Device() Device { return d.info }

func (d *device) MemInfo() (free, total int64, err error) {
	err = d.do(func() error {
		free, total, err = cu.MemInfo()
		return err
	})
	return free, total, err
}

func (d *device) Alloc(bytes int64) (Ptr, error) {
	var p cu.DevicePtr
	err := d.do(func() (err error) {
		p, err = cu.MemAlloc(bytes)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: alloc %d bytes: %w", bytes, err)
	}
	return Ptr(p), nil
}

func (d *device) Free(p Ptr) error {
	if p == 0 {
		return nil
	}
	return d.do(func() error { return cu.MemFree(cu.DevicePtr(p)) })
}

func (d *device) Upload(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.do(func() error {
		return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)), d.stream)
	})
}

func (d *device) Download(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.do(func() error {
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)), d.stream); err != nil {
			return err
		}
		return d.stream.Synchronize()
	})
}

func (d *device) Copy(dst, src Ptr, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	return d.do(func() error { return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), bytes, d.stream) })
}

func (d *device) Memset(dst Ptr, value byte, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	return d.do(func() error { return cu.MemsetD8Async(cu.DevicePtr(dst), value, bytes, d.stream) })
}

func (d *device) Launch(name string, grid, block Dim3, shared int, args ...any) error {
	params, ok := d.params[name]
	if !ok {
		return fmt.Errorf("%w: no kernel named %s", ErrLaunch, name)
	}
	if err := CheckLaunch(name, grid, block, shared, d.optIn); err != nil {
		return err
	}
	slots, kinds, err := Args(args...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := CheckArgs(name, params, kinds); err != nil {
		return err
	}
	ptrs := make([]unsafe.Pointer, len(slots))
	for i := range slots {
		ptrs[i] = unsafe.Pointer(&slots[i])
	}
	g, b := grid.Norm(), block.Norm()
	return d.do(func() error {
		k, err := d.kernel(name, shared)
		if err != nil {
			return err
		}
		if err := k.fn.Launch(g.X, g.Y, g.Z, b.X, b.Y, b.Z, shared, d.stream, ptrs); err != nil {
			return fmt.Errorf("cuda: launch %s grid %v block %v shared %d: %w", name, g, b, shared, err)
		}
		return nil
	})
}

// kernel returns the loaded function name, its limit raised to shared
// bytes if needed (inside do).
func (d *device) kernel(name string, shared int) (*kernel, error) {
	k, ok := d.fns[name]
	if !ok {
		fn, err := d.mod.Function(name)
		if err != nil {
			return nil, fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		k = &kernel{fn: fn, shared: defaultShared}
		d.fns[name] = k
	}
	if shared > k.shared {
		if err := setMaxShared(k.fn, shared); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		k.shared = shared
	}
	return k, nil
}

func (d *device) Gemm(g Gemm) error {
	if err := g.Check(); err != nil {
		return err
	}
	if g.Empty() {
		return nil
	}
	return d.do(func() error { return d.blas.gemm(g) })
}

func (d *device) Synchronize() error {
	return d.do(func() error { return d.stream.Synchronize() })
}

func (d *device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if d.started {
		d.stream.Synchronize()
	}
	return d.release()
}
