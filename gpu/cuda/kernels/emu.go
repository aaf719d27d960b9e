//go:build cudaemu

package kernels

/*
#cgo CXXFLAGS: -std=c++17 -O2 -Wno-unknown-pragmas
#include <stdlib.h>
#include "emu_api.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// Emulate runs kernel name on the CPU (see emu_runtime.cc): grid × block
// threads, shared bytes of dynamic shared memory, slots and kinds as
// cuda.Args packs them. Pointers in slots are host addresses. Launches are
// serialised.
func Emulate(name string, grid, block cuda.Dim3, shared int, slots []uint64, kinds []cuda.ArgKind) error {
	g, b := grid.Norm(), block.Norm()
	cg := [3]C.uint{C.uint(g.X), C.uint(g.Y), C.uint(g.Z)}
	cb := [3]C.uint{C.uint(b.X), C.uint(b.Y), C.uint(b.Z)}
	cname, ckinds := C.CString(name), C.CString(cuda.KindsOf(kinds))
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(ckinds))
	var args *C.uint64_t
	if len(slots) > 0 {
		args = (*C.uint64_t)(unsafe.Pointer(&slots[0]))
	}
	var msg [512]C.char
	if C.emu_launch(cname, &cg[0], &cb[0], C.size_t(shared), args, ckinds, &msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("%w: %s", cuda.ErrLaunch, C.GoString(&msg[0]))
	}
	return nil
}

// Emulated returns the kernels the emulator has, with their argument kinds
// (cuda.ArgKind letters) read from their C++ signatures.
func Emulated() map[string]string {
	out := map[string]string{}
	for i := range int(C.emu_kernel_count()) {
		out[C.GoString(C.emu_kernel_name(C.int(i)))] = C.GoString(C.emu_kernel_kinds(C.int(i)))
	}
	return out
}
