// Package emu is a CPU emulator of cuda.Runtime (build tag cudaemu, cgo
// and g++): the engine's kernels and their tests run on a machine without
// a GPU, from the very same CUDA C sources as on the device.
//
// What it models: device memory (host mappings with a guard page after
// each allocation, so an overrun faults; bounds-checked copies), kernels
// launched by name with their arguments checked against the kernel's C++
// signature, CUDA's thread hierarchy with __syncthreads, warp shuffles,
// ballots and __syncwarp as real barriers (threads are fibers; a thread
// that returns while others wait at a barrier is an error, not a hang),
// static and dynamic shared memory poisoned at each block start, and
// cuBLAS products in each precision (inputs rounded to TF32 or bf16, fp32
// sums). What it cannot: timing, occupancy and memory coalescing; races
// between blocks (blocks run one at a time, in order) or between threads
// of a block (they interleave only at barriers); a GPU's fast-math
// approximations (__expf is expf here); the exact TF32 rounding and
// summation order of cuBLAS (tests compare products with a tolerance).
// The kernels' C++ half lives in package kernels (see its doc).
//
// Example:
//
//	rt := emu.New(0)
//	x, _ := cuda.UploadSlice(rt, []float32{1, 2, 3})
//	err := rt.Launch("selftest_block_sum", cuda.D1(1), cuda.D1(32), 0, out, x, 3)
package emu
