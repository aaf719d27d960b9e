package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Runtime is one CUDA device as the compute engine sees it: device memory,
// kernels launched by name, and matrix products, all ordered on one stream.
// Launch, Gemm, Copy and Memset return once the work is queued; Download
// and Synchronize wait for everything queued before them. Two
// implementations exist: the device itself (Open, build tag cuda) and a CPU
// emulator that runs the very same kernel sources (package emu, build tag
// cudaemu). A Runtime is not safe for concurrent use unless its
// implementation says so.
type Runtime interface {
	// Device describes the device (the emulator describes itself).
	Device() Device
	// MemInfo returns the free and total device memory in bytes.
	MemInfo() (free, total int64, err error)

	// Alloc returns bytes of uninitialised device memory (bytes > 0),
	// aligned to at least 16 bytes.
	Alloc(bytes int64) (Ptr, error)
	// Free releases memory from Alloc; Free(0) does nothing.
	Free(p Ptr) error
	// Upload copies host bytes to dst; src may be reused when it returns.
	Upload(dst Ptr, src []byte) error
	// Download copies len(dst) bytes from src to the host, after all work
	// queued before it.
	Download(dst []byte, src Ptr) error
	// Copy copies bytes from src to dst on the device (no overlap).
	Copy(dst, src Ptr, bytes int64) error
	// Memset sets bytes bytes at dst to value.
	Memset(dst Ptr, value byte, bytes int64) error

	// Launch runs kernel name (an extern "C" __global__ function of the
	// program the runtime was opened with) over grid blocks of block
	// threads with shared bytes of dynamic shared memory. args are the
	// kernel's arguments in order (see Arg); a count or kind that does not
	// match the kernel's signature is an error, not a crash.
	Launch(name string, grid, block Dim3, shared int, args ...any) error
	// Gemm queues one (strided-batched) matrix product; see Gemm.
	Gemm(g Gemm) error

	// Synchronize waits for all queued work and returns its first error.
	Synchronize() error
	// Close frees what the runtime holds (not the memory from Alloc,
	// which callers free) and ends it.
	Close() error
}

// Ptr is a device address (0 is none). Offsets are in bytes: p.Add(4*i)
// is element i of a float32 buffer.
type Ptr uintptr

// Add returns p offset by bytes.
func (p Ptr) Add(bytes int) Ptr { return p + Ptr(bytes) }

// Dim3 is a grid or block shape, as CUDA's dim3; a zero Y or Z means 1.
type Dim3 struct{ X, Y, Z int }

// D1 is the one-dimensional shape (x, 1, 1).
func D1(x int) Dim3 { return Dim3{X: x, Y: 1, Z: 1} }

// Norm returns d with zero Y and Z set to 1.
func (d Dim3) Norm() Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Threads is X·Y·Z (of the normalised shape).
func (d Dim3) Threads() int { n := d.Norm(); return n.X * n.Y * n.Z }

// ErrLaunch is wrapped by every launch argument or shape error.
var ErrLaunch = errors.New("cuda: bad launch")

// ArgKind is the C type of one kernel argument, as a letter:
//
//	'p' a pointer (Ptr)         'i' int (int32 or a Go int that fits)
//	'u' unsigned int (uint32)   'f' float (float32)
//	'd' double (float64)        'l' long long (int64)
//	'L' unsigned long long (uint64)
type ArgKind byte

// Args packs kernel arguments into 8-byte slots, one per argument (the
// value in the low bytes, little-endian, as cuLaunchKernel reads it), and
// their kinds. A Go int becomes a C int and must fit in 32 bits; any other
// Go type is an error.
func Args(args ...any) (slots []uint64, kinds []ArgKind, err error) {
	slots, kinds = make([]uint64, len(args)), make([]ArgKind, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case Ptr:
			slots[i], kinds[i] = uint64(v), 'p'
		case int:
			if v != int(int32(v)) {
				return nil, nil, fmt.Errorf("%w: argument %d = %d does not fit a C int", ErrLaunch, i, v)
			}
			slots[i], kinds[i] = uint64(uint32(int32(v))), 'i'
		case int32:
			slots[i], kinds[i] = uint64(uint32(v)), 'i'
		case uint32:
			slots[i], kinds[i] = uint64(v), 'u'
		case float32:
			slots[i], kinds[i] = uint64(math.Float32bits(v)), 'f'
		case float64:
			slots[i], kinds[i] = math.Float64bits(v), 'd'
		case int64:
			slots[i], kinds[i] = uint64(v), 'l'
		case uint64:
			slots[i], kinds[i] = v, 'L'
		default:
			return nil, nil, fmt.Errorf("%w: argument %d has Go type %T (want Ptr, int, int32, uint32, float32, float64, int64 or uint64)", ErrLaunch, i, a)
		}
	}
	return slots, kinds, nil
}

// CheckLaunch validates a launch shape against CUDA's limits: every
// dimension ≥ 1, grid Y and Z ≤ 65535, at most 1024 threads a block
// (block Z ≤ 64), dynamic shared memory in [0, maxShared].
func CheckLaunch(name string, grid, block Dim3, shared, maxShared int) error {
	g, b := grid.Norm(), block.Norm()
	switch {
	case g.X < 1 || g.Y < 1 || g.Z < 1 || b.X < 1 || b.Y < 1 || b.Z < 1:
		return fmt.Errorf("%w: %s: grid %v, block %v: every dimension must be ≥ 1", ErrLaunch, name, g, b)
	case g.X > math.MaxInt32 || g.Y > 65535 || g.Z > 65535:
		return fmt.Errorf("%w: %s: grid %v too large", ErrLaunch, name, g)
	case b.Threads() > 1024 || b.Z > 64:
		return fmt.Errorf("%w: %s: block %v has more than 1024 threads (or Z > 64)", ErrLaunch, name, b)
	case shared < 0 || shared > maxShared:
		return fmt.Errorf("%w: %s: %d bytes of dynamic shared memory, device allows %d", ErrLaunch, name, shared, maxShared)
	}
	return nil
}

// Bytes views a slice of fixed-size elements (float32, int32, uint16, ...)
// as its bytes, without copying, for Upload and Download.
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// UploadSlice copies s to new device memory and returns its address.
func UploadSlice[T any](rt Runtime, s []T) (Ptr, error) {
	b := Bytes(s)
	p, err := rt.Alloc(int64(max(len(b), 1)))
	if err != nil {
		return 0, err
	}
	if err := rt.Upload(p, b); err != nil {
		rt.Free(p)
		return 0, err
	}
	return p, nil
}

// DownloadSlice copies len(dst) elements from src into dst.
func DownloadSlice[T any](rt Runtime, dst []T, src Ptr) error {
	return rt.Download(Bytes(dst), src)
}
