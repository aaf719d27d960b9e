// common.cuh: what every kernel file uses. Included first by mgrpo.cu; the
// emulator (emu.h) defines MGRPO_EMU and its own EMU_REGISTER and
// DYNAMIC_SHARED before it.
//
// Conventions of all kernels:
//   - extern "C" names (no C++ mangling): the runtimes launch by name;
//   - the shapes of every buffer in the comment above the kernel, rows
//     row-major, sizes in elements; a doc line names the CPU twin;
//   - reductions run in a fixed order (warp butterflies, then warps in
//     order), never float atomics, so a launch is bit-reproducible;
//   - a kernel that uses block_sum/block_max needs blockDim.x a multiple of
//     32 (whole warps) and a 1-D block, and its threads must all reach it.
#pragma once

#ifndef MGRPO_EMU
// EMU_REGISTER(kernel) lists a kernel for the emulator; nothing on a GPU.
#define EMU_REGISTER(kernel)
// The launch's dynamic shared memory, declared once at file scope (one
// linkage for every kernel, extern "C" or template).
extern __shared__ __align__(16) unsigned char mgrpo_dynamic_shared[];
// DYNAMIC_SHARED(T, name) declares T* name over the launch's dynamic shared
// memory (16-byte aligned).
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(mgrpo_dynamic_shared)
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

#define FULL_MASK 0xffffffffu

// bf16 is a bfloat16 as its bits: the top half of a float32.
typedef unsigned short bf16;

__device__ __forceinline__ float bf16_to_f32(bf16 h) { return __uint_as_float((unsigned)h << 16); }

// f32_to_bf16 rounds to nearest even (as CUDA's __float2bfloat16 and Go's
// cuda.BF16); NaN becomes 0x7fff.
__device__ __forceinline__ bf16 f32_to_bf16(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)0x7fff;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16)(u >> 16);
}

// warp_sum returns the sum of v over the warp's 32 lanes in every lane (an
// xor butterfly: each step adds a commutative pair, so all lanes get the
// same bits).
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    T u = __shfl_xor_sync(FULL_MASK, v, o);
    v = u > v ? u : v;
  }
  return v;
}

template <class T>
__device__ __forceinline__ T warp_min(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    T u = __shfl_xor_sync(FULL_MASK, v, o);
    v = u < v ? u : v;
  }
  return v;
}

// block_reduce combines v over the block with op (sum, max or min): each
// warp reduces its lanes, the warps' results go through shared memory, and
// every warp reduces those in warp order, so every thread returns the same
// bits. part holds 32 values; the leading barrier lets a caller reuse it.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T identity, T* part, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = op(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  return op(lane < warps ? part[lane] : identity);
}

struct WarpSum {
  template <class T>
  __device__ __forceinline__ T operator()(T v) const { return warp_sum(v); }
};
struct WarpMax {
  template <class T>
  __device__ __forceinline__ T operator()(T v) const { return warp_max(v); }
};
struct WarpMin {
  template <class T>
  __device__ __forceinline__ T operator()(T v) const { return warp_min(v); }
};

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  return block_reduce(v, 0.0f, part, WarpSum());
}

__device__ __forceinline__ double block_sum(double v) {
  __shared__ double part[32];
  return block_reduce(v, 0.0, part, WarpSum());
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  return block_reduce(v, -INFINITY, part, WarpMax());
}

__device__ __forceinline__ long long block_min(long long v) {
  __shared__ long long part[32];
  return block_reduce(v, (long long)0x7fffffffffffffffLL, part, WarpMin());
}

// chunk returns the elements [lo, hi) of part `part` of `parts` equal
// contiguous parts of n (the last may be shorter).
__device__ __forceinline__ void chunk(long long n, int part, int parts, long long* lo, long long* hi) {
  long long size = (n + parts - 1) / parts;
  *lo = min(n, (long long)part * size);
  *hi = min(n, *lo + size);
}
