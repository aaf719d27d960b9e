// Package cuda is mgrpo's NVIDIA GPU support.
//
// Runtime (runtime.go) is the device as the compute engine sees it: device
// memory, kernels launched by name with checked arguments, row-major
// matrix products in fp32, TF32 or bf16 (Gemm), all ordered on one
// stream. Open (build tag cuda) starts one on a GPU: it compiles a
// Program (the engine's kernels: package kernels) with NVRTC for the
// device and calls cuBLAS through a small cgo binding of our own
// (cublas_cuda.go); package emu (build tag cudaemu) is a CPU emulator of
// it that runs the same kernel sources. docs/CUDA.md describes all three.
//
// The CUDA engine (package gpu's cuda_*.go files) runs over a Runtime;
// gpu.OpenDevice("cuda") opens one on GPU 0. The older path, device
// discovery and a cuBLAS Sgemm with host operands (BLAS), is no longer the
// learner's.
//
// The cuda-tagged files import gorgonia.org/cu and gorgonia.org/cu/blas
// (cgo, CUDA headers and libcuda/libcublas/libnvrtc needed). Note that cu's
// package init calls cuInit and exits the process when no driver is
// present, so a binary built with -tags cuda only starts on a machine with
// a GPU. Without the tag (nocuda.go, the default) the same API compiles
// with no cgo and no CUDA import: Available reports false, and Devices
// and NewBLAS return ErrNoCUDA.
//
// Matrices are row-major, as in gonum's blas32 and the rest of mgrpo; the
// cuBLAS calls map them onto cuBLAS's column-major convention.
//
// The default build imports only the standard library; no build imports
// the model, actors or messages.
//
// Example:
//
//	rt, err := cuda.Open(0, kernels.Program()) // -tags cuda; emu.New(0) with -tags cudaemu
//	x, err := cuda.UploadSlice(rt, []float32{1, 2, 3})
//	err = rt.Gemm(cuda.Gemm{M: m, N: n, K: k, Alpha: 1, A: a, B: b, C: c, LDA: k, LDB: n, LDC: n, Math: cuda.MathTF32})
package cuda
