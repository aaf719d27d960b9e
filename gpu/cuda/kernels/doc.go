// Package kernels holds the CUDA C kernels of mgrpo's CUDA engine
// (mgrpo.cu and the files it includes), embedded so that every runtime
// gets the same source, and a typed Go launcher per kernel with its launch
// shape.
//
// The real runtime (cuda.Open, build tag cuda) compiles Program with NVRTC
// for the device at start; the emulator (package emu, build tag cudaemu)
// compiles the same files as C++ with emu.h, which is why the emulator's
// C++ half (emu*.cc, emu*.h, emu.go) lives here: Go rebuilds a cgo package
// when a file it embeds changes, not when a header outside its directory
// does.
//
// Each kernel is a twin of a CPU kernel of package gpu and says which; the
// tests in package gpu (cuda_*_test.go, tags cuda or cudaemu) check each
// against its twin. Kernels never use float atomics: two runs of a launch
// give the same bits.
//
// Example (on the emulator, -tags cudaemu):
//
//	rt := emu.New(0)
//	err := kernels.RMSNorm(rt, y, 0, inv, x, w, n, d, 1e-6)
package kernels
