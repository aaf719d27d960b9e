//go:build cudaemu

// emu.h: what CUDA C gives a kernel, for g++, so that the kernels of
// mgrpo.cu compile unchanged as C++ and run on the CPU (emu_runtime.cc runs
// them). Included before mgrpo.cu by emu_kernels.cc only; the CUDA build
// never sees it.
//
// A block's threads are fibers on one OS thread, switched only at
// barriers (__syncthreads, warp shuffles, __syncwarp, ballots), so:
//   - __shared__ is a static in the section emu_shared (poisoned with 0xff
//     bytes, a NaN for floats, at every block start), dynamic shared memory
//     is DYNAMIC_SHARED (also poisoned);
//   - integer atomics are plain read-modify-writes; float atomics are
//     deliberately missing: a kernel that uses one does not compile here
//     (their order varies on a GPU, and runs must be bit-reproducible).
#pragma once

// No fused multiply-adds: the CPU twins round every operation (cgo does not
// take -ffp-contract=off as a flag; x86-64's baseline has no FMA anyway).
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>
#include <utility>

#define MGRPO_EMU 1

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
};

namespace emu {
extern const uint3* thread_idx;  // the running fiber's threadIdx
extern uint3 block_idx;
extern dim3 block_dim, grid_dim;

// The warp operations, by what a lane contributes and gets back.
enum WarpOp { kSyncWarp, kShflIdx, kShflXor, kShflDown, kShflUp, kBallot, kAny, kAll, kCollective };

void syncthreads();
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
void* dynamic_shared();
size_t dynamic_shared_size();
[[noreturn]] void trap(const char* why);

// Collective is one lane's part of a warp-collective operation (the WMMA
// loads, stores and products of emu_wmma.h). Every lane of a full warp
// calls warp_collective with its own; when all 32 wait, run is called once
// with their parts in lane order, before any lane goes on: the operation
// reads and writes memory for the whole warp at one instant, as a
// .sync.aligned instruction does. Lanes waiting in collectives of
// different run or what are an error; run reports misuse with
// collective_fail.
struct Collective {
  void (*run)(Collective* const* lanes);
  const char* what;  // names the operation in errors
};
void warp_collective(Collective* c);
void collective_fail(const char* why);

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp shuffles move up to 8 bytes");
  uint64_t u = 0;
  memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T>
T from_bits(uint64_t u) {
  T v;
  memcpy(&v, &u, sizeof(T));
  return v;
}

// One kernel: its argument kinds (cuda.ArgKind letters) and a thunk that
// unpacks 8-byte argument slots by the kernel's own signature.
struct Entry {
  const char* kinds;
  void (*call)(const void* fn, const uint64_t* slots);
  const void* fn;
};

template <class T>
constexpr char kind_of() {
  if constexpr (std::is_pointer<T>::value) return 'p';
  else if constexpr (std::is_same<T, int>::value) return 'i';
  else if constexpr (std::is_same<T, unsigned>::value) return 'u';
  else if constexpr (std::is_same<T, float>::value) return 'f';
  else if constexpr (std::is_same<T, double>::value) return 'd';
  else if constexpr (std::is_same<T, long long>::value) return 'l';
  else if constexpr (std::is_same<T, unsigned long long>::value) return 'L';
  else static_assert(sizeof(T) == 0, "kernel arguments are pointers, int, unsigned, float, double, long long or unsigned long long");
}

template <class... A>
struct Kinds {
  static constexpr char value[sizeof...(A) + 1] = {kind_of<A>()..., 0};
};

template <class... A, size_t... I>
void call_unpacked(void (*fn)(A...), const uint64_t* slots, std::index_sequence<I...>) {
  fn(from_bits<A>(slots[I])...);
}

template <class... A>
Entry entry_of(void (*fn)(A...)) {
  auto call = [](const void* f, const uint64_t* slots) {
    call_unpacked(reinterpret_cast<void (*)(A...)>(const_cast<void*>(f)), slots, std::index_sequence_for<A...>{});
  };
  return Entry{Kinds<A...>::value, call, reinterpret_cast<const void*>(fn)};
}

bool register_kernel(const char* name, Entry e);
}  // namespace emu

#define EMU_REGISTER(kernel) static const bool emu_registered_##kernel = emu::register_kernel(#kernel, emu::entry_of(&kernel));

#define threadIdx (*emu::thread_idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define warpSize 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static __attribute__((section("emu_shared")))
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(emu::dynamic_shared())
// EMU_CHECK_SHARED(bytes) ends the launch with an error unless it has at
// least bytes of dynamic shared memory (a launcher that undercounts a
// kernel's layout; nothing on a GPU).
#define EMU_CHECK_SHARED(bytes) \
  if (emu::dynamic_shared_size() < (size_t)(bytes)) emu::trap("less dynamic shared memory than the kernel's layout takes")

inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::warp_op(emu::kSyncWarp, mask, 0, 0, 32); }
[[noreturn]] inline void __trap() { emu::trap("__trap()"); }

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return emu::from_bits<T>(emu::warp_op(emu::kShflIdx, mask, emu::to_bits(v), src, width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return emu::from_bits<T>(emu::warp_op(emu::kShflXor, mask, emu::to_bits(v), lane_mask, width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu::from_bits<T>(emu::warp_op(emu::kShflDown, mask, emu::to_bits(v), (int)delta, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu::from_bits<T>(emu::warp_op(emu::kShflUp, mask, emu::to_bits(v), (int)delta, width));
}
inline unsigned __ballot_sync(unsigned mask, int pred) { return (unsigned)emu::warp_op(emu::kBallot, mask, pred != 0, 0, 32); }
inline int __any_sync(unsigned mask, int pred) { return (int)emu::warp_op(emu::kAny, mask, pred != 0, 0, 32); }
inline int __all_sync(unsigned mask, int pred) { return (int)emu::warp_op(emu::kAll, mask, pred != 0, 0, 32); }

// Math: the IEEE-rounded intrinsics are the plain operations (fp-contract is off,
// so none is fused); the fast approximations are the
// accurate functions (a GPU's __expf is a little less accurate).
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline unsigned __float_as_uint(float x) { return emu::from_bits<unsigned>(emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return emu::from_bits<float>(emu::to_bits(x)); }
inline int __float_as_int(float x) { return emu::from_bits<int>(emu::to_bits(x)); }
inline float __int_as_float(int x) { return emu::from_bits<float>(emu::to_bits(x)); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
template <class T>
T __ldg(const T* p) { return *p; }

// The vector type the kernels load four floats with (16-byte aligned, as
// CUDA's: a misaligned load faults on both).
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// Integer atomics (fibers never interleave inside one).
template <class T>
T atomicAdd(T* p, T v) {
  static_assert(std::is_integral<T>::value, "float atomics are not deterministic: not in the emulator");
  T old = *p;
  *p = old + v;
  return old;
}
template <class T>
T atomicMin(T* p, T v) {
  static_assert(std::is_integral<T>::value, "integer atomics only");
  T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  static_assert(std::is_integral<T>::value, "integer atomics only");
  T old = *p;
  *p = v > old ? v : old;
  return old;
}
template <class T>
T atomicCAS(T* p, T compare, T v) {
  static_assert(std::is_integral<T>::value, "integer atomics only");
  T old = *p;
  if (old == compare) *p = v;
  return old;
}

#include "emu_wmma.h"
