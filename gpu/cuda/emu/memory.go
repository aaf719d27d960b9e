//go:build cudaemu

package emu

import (
	"fmt"
	"sort"
	"syscall"
	"unsafe"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// allocation is one Alloc: a private mapping whose last page is
// inaccessible, with the buffer ending (16-byte aligned) just before it.
type allocation struct {
	base  cuda.Ptr
	size  int64
	mem   []byte // the whole mapping
	start int    // the buffer's offset in mem
}

// heap holds the allocations, sorted by address.
type heap struct {
	list []*allocation
	used int64
}

var pageSize = syscall.Getpagesize()

func (h *heap) alloc(bytes int64) (cuda.Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("emu: alloc %d bytes: must be > 0", bytes)
	}
	data := (int(bytes) + 15) &^ 15
	total := (data+pageSize-1)/pageSize*pageSize + pageSize
	mem, err := syscall.Mmap(-1, 0, total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return 0, fmt.Errorf("emu: alloc %d bytes: %w", bytes, err)
	}
	if err := syscall.Mprotect(mem[total-pageSize:], syscall.PROT_NONE); err != nil {
		syscall.Munmap(mem)
		return 0, fmt.Errorf("emu: alloc %d bytes: guard page: %w", bytes, err)
	}
	a := &allocation{size: bytes, mem: mem, start: total - pageSize - data}
	a.base = cuda.Ptr(uintptr(unsafe.Pointer(&mem[a.start])))
	i := sort.Search(len(h.list), func(i int) bool { return h.list[i].base > a.base })
	h.list = append(h.list, nil)
	copy(h.list[i+1:], h.list[i:])
	h.list[i] = a
	h.used += bytes
	return a.base, nil
}

func (h *heap) free(p cuda.Ptr) error {
	if p == 0 {
		return nil
	}
	i := sort.Search(len(h.list), func(i int) bool { return h.list[i].base >= p })
	if i == len(h.list) || h.list[i].base != p {
		return fmt.Errorf("emu: free %#x: not an allocation's start", uintptr(p))
	}
	a := h.list[i]
	h.list = append(h.list[:i], h.list[i+1:]...)
	h.used -= a.size
	return syscall.Munmap(a.mem)
}

// bytes returns the n bytes at p, which must lie inside one allocation.
func (h *heap) bytes(p cuda.Ptr, n int64) ([]byte, error) {
	i := sort.Search(len(h.list), func(i int) bool { return h.list[i].base > p }) - 1
	if i < 0 || n < 0 || p+cuda.Ptr(n) > h.list[i].base+cuda.Ptr(h.list[i].size) {
		return nil, fmt.Errorf("emu: %d bytes at %#x are not inside one allocation", n, uintptr(p))
	}
	a := h.list[i]
	off := a.start + int(p-a.base)
	return a.mem[off : off+int(n) : off+int(n)], nil
}

// contains reports whether p points into an allocation (or is 0).
func (h *heap) contains(p cuda.Ptr) bool {
	if p == 0 {
		return true
	}
	_, err := h.bytes(p, 0)
	return err == nil
}
