//go:build cudaemu

// The kernels, compiled for the emulator: emu.h stands in for CUDA. The
// unnamed namespace gives every function internal linkage, so that the
// __shared__ statics of inline functions are not COMDAT (g++ refuses to put
// COMDAT and plain variables in one section, and emu_shared must hold all).
#include "emu.h"

namespace {
#include "mgrpo.cu"
}  // namespace
