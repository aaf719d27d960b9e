// wmma.cuh: warp matrix operations on the tensor cores, the part of CUDA's
// nvcuda::wmma API (mma.h) the kernels use, in namespace wmma: fragments of
// the 16×16×16 bf16 and 16×16×8 TF32 shapes with fp32 accumulators,
// fill_fragment, load_matrix_sync, store_matrix_sync, mma_sync.
//
// Why not mma.h: NVRTC has no built-in mma.h (11.8 has none; the toolkit's
// include directory differs between machines, and a machine may have the
// driver and libraries without it), so these call the compiler built-ins
// mma.h itself calls (__mma_bf16_m16n16k16_*, __mma_tf32_m16n16k8_*,
// __hmma_m16n16k16_*_c_f32), which every NVRTC since 11.0 has for sm_80
// on. The emulator has its own twin of this API (emu_wmma.h): the same
// names, warp-collective, with a scrambled element mapping.
//
// The rules a kernel follows (the emulator enforces them):
//   - all 32 lanes of a warp call each load, store and product together,
//     with the same pointer (256-bit aligned), leading dimension (a
//     multiple of 16 bytes) and layout;
//   - which lane holds which element is unspecified: a kernel reads or
//     writes fragment elements (x[i]) only element-wise, with one value for
//     all, or between fragments of the same type (whose mappings agree);
//     anything row- or column-wise goes through memory;
//   - TF32 inputs are rounded first (f32_to_tf32, as __float_to_tf32):
//     the tensor cores read only their top 19 bits.
#pragma once

// f32_to_tf32 rounds x to TF32 (a 10-bit mantissa), to nearest with ties
// away from zero as cvt.rna.tf32.f32 (and Go's cuda.TF32); NaN and
// infinities pass through.
__device__ __forceinline__ float f32_to_tf32(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  return __uint_as_float((u + 0x1000u) & 0xffffe000u);
}

#ifndef MGRPO_EMU
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment;

// bf16 operands: 8 elements (4 registers) a lane; TF32 operands: 4;
// fp32 accumulators: 8.
template <class L>
struct __align__(16) fragment<matrix_a, 16, 16, 16, bf16, L> {
  typedef bf16 element_type;
  enum { num_elements = 8 };
  bf16 x[8];
};
template <class L>
struct __align__(16) fragment<matrix_b, 16, 16, 16, bf16, L> {
  typedef bf16 element_type;
  enum { num_elements = 8 };
  bf16 x[8];
};
template <class L>
struct __align__(16) fragment<matrix_a, 16, 16, 8, precision::tf32, L> {
  typedef float element_type;
  enum { num_elements = 4 };
  float x[4];
};
template <class L>
struct __align__(16) fragment<matrix_b, 16, 16, 8, precision::tf32, L> {
  typedef float element_type;
  enum { num_elements = 4 };
  float x[4];
};
template <int K>
struct __align__(16) fragment<accumulator, 16, 16, K, float, void> {
  typedef float element_type;
  enum { num_elements = 8 };
  float x[8];
};

namespace detail {
// col is the built-ins' layout argument: 0 row-major, 1 column-major (the
// built-ins take constants only: a layout_t argument picks a call).
template <class L>
struct col;
template <>
struct col<row_major> {
  static constexpr int value = 0;
};
template <>
struct col<col_major> {
  static constexpr int value = 1;
};
}  // namespace detail

template <class Use, int M, int N, int K, class T, class L, class V>
__device__ __forceinline__ void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
#pragma unroll
  for (int i = 0; i < fragment<Use, M, N, K, T, L>::num_elements; i++) f.x[i] = v;
}

template <class L>
__device__ __forceinline__ void load_matrix_sync(fragment<matrix_a, 16, 16, 16, bf16, L>& f, const bf16* p, unsigned ldm) {
  __mma_bf16_m16n16k16_ld_a((int*)f.x, (const int*)p, ldm, detail::col<L>::value);
}
template <class L>
__device__ __forceinline__ void load_matrix_sync(fragment<matrix_b, 16, 16, 16, bf16, L>& f, const bf16* p, unsigned ldm) {
  __mma_bf16_m16n16k16_ld_b((int*)f.x, (const int*)p, ldm, detail::col<L>::value);
}
template <class L>
__device__ __forceinline__ void load_matrix_sync(fragment<matrix_a, 16, 16, 8, precision::tf32, L>& f, const float* p,
                                                 unsigned ldm) {
  __mma_tf32_m16n16k8_ld_a((int*)f.x, (const int*)p, ldm, detail::col<L>::value);
}
template <class L>
__device__ __forceinline__ void load_matrix_sync(fragment<matrix_b, 16, 16, 8, precision::tf32, L>& f, const float* p,
                                                 unsigned ldm) {
  __mma_tf32_m16n16k8_ld_b((int*)f.x, (const int*)p, ldm, detail::col<L>::value);
}

__device__ __forceinline__ void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                                                 layout_t layout) {
  if (layout == mem_col_major)
    __hmma_m16n16k16_ld_c_f32(f.x, p, ldm, 1);
  else
    __hmma_m16n16k16_ld_c_f32(f.x, p, ldm, 0);
}
__device__ __forceinline__ void load_matrix_sync(fragment<accumulator, 16, 16, 8, float>& f, const float* p, unsigned ldm,
                                                 layout_t layout) {
  if (layout == mem_col_major)
    __mma_tf32_m16n16k8_ld_c(f.x, p, ldm, 1);
  else
    __mma_tf32_m16n16k8_ld_c(f.x, p, ldm, 0);
}
__device__ __forceinline__ void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                                                  layout_t layout) {
  if (layout == mem_col_major)
    __hmma_m16n16k16_st_c_f32(p, f.x, ldm, 1);
  else
    __hmma_m16n16k16_st_c_f32(p, f.x, ldm, 0);
}
__device__ __forceinline__ void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 8, float>& f, unsigned ldm,
                                                  layout_t layout) {
  if (layout == mem_col_major)
    __mma_m16n16k8_st_c_f32(p, f.x, ldm, 1);
  else
    __mma_m16n16k8_st_c_f32(p, f.x, ldm, 0);
}

// mma_sync: d = a·b + c; the built-ins' layout pair is 2·col(a) + col(b).
template <class LA, class LB>
__device__ __forceinline__ void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                                         const fragment<matrix_a, 16, 16, 16, bf16, LA>& a,
                                         const fragment<matrix_b, 16, 16, 16, bf16, LB>& b,
                                         const fragment<accumulator, 16, 16, 16, float>& c) {
  __mma_bf16_m16n16k16_mma_f32(d.x, (const int*)a.x, (const int*)b.x, c.x, 2 * detail::col<LA>::value + detail::col<LB>::value, 0);
}
template <class LA, class LB>
__device__ __forceinline__ void mma_sync(fragment<accumulator, 16, 16, 8, float>& d,
                                         const fragment<matrix_a, 16, 16, 8, precision::tf32, LA>& a,
                                         const fragment<matrix_b, 16, 16, 8, precision::tf32, LB>& b,
                                         const fragment<accumulator, 16, 16, 8, float>& c) {
  __mma_tf32_m16n16k8_mma_f32(d.x, (const int*)a.x, (const int*)b.x, c.x, 2 * detail::col<LA>::value + detail::col<LB>::value, 0);
}

}  // namespace wmma
#endif
