//go:build cudaemu

// emu_wmma.h: the warp matrix operations of CUDA (the part of nvcuda::wmma
// the kernels use, in namespace wmma as wmma.cuh declares it on a GPU) for
// the emulator. Included by emu.h.
//
// What it models:
//   - the fragments of the 16×16×16 bf16 and 16×16×8 TF32 shapes, fp32
//     accumulators: each lane holds num_elements elements in x;
//   - load_matrix_sync, store_matrix_sync and mma_sync are warp-collective
//     (emu::Collective): all 32 lanes of a full warp must reach the same
//     one, with the same pointer, leading dimension and layout; the pointer
//     must be 256-bit aligned and the leading dimension a multiple of 16
//     bytes, as CUDA requires;
//   - which lane holds which element is scrambled: a fixed pseudo-random
//     permutation per fragment type, so a kernel that assumes the GPU's
//     (unspecified) mapping computes nonsense here; element-wise operations
//     between fragments of one type, or with one value for every element,
//     are what a kernel may do with x;
//   - mma_sync widens bf16 exactly, keeps the top 19 bits of a TF32 input
//     (a kernel rounds its inputs itself, f32_to_tf32, as __float_to_tf32
//     does), multiplies exactly in fp32 and sums in fp32 in k order
//     starting from c (the hardware's order and internal precision differ:
//     tests hold the results to tolerances, not bits).
#pragma once

#include <stdint.h>

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

namespace detail {

// Dims are the rows and columns of the matrix a fragment holds.
template <class Use, int M, int N, int K>
struct Dims;
template <int M, int N, int K>
struct Dims<matrix_a, M, N, K> {
  static constexpr int rows = M, cols = K, use = 0;
};
template <int M, int N, int K>
struct Dims<matrix_b, M, N, K> {
  static constexpr int rows = K, cols = N, use = 1;
};
template <int M, int N, int K>
struct Dims<accumulator, M, N, K> {
  static constexpr int rows = M, cols = N, use = 2;
};

// Elem is what a fragment of element type T stores, and its kind:
// 0 fp32, 1 bf16 (unsigned short bits), 2 TF32 (in a float).
template <class T>
struct Elem;
template <>
struct Elem<float> {
  typedef float type;
  static constexpr int kind = 0;
};
template <>
struct Elem<unsigned short> {
  typedef unsigned short type;
  static constexpr int kind = 1;
};
template <>
struct Elem<precision::tf32> {
  typedef float type;
  static constexpr int kind = 2;
};

template <class L>
struct LayoutOf {
  static constexpr int id = 0;  // an accumulator: the layout is an argument
};
template <>
struct LayoutOf<row_major> {
  static constexpr int id = 1;
};
template <>
struct LayoutOf<col_major> {
  static constexpr int id = 2;
};

}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && (K == 16 || K == 8), "the emulator has the 16×16×16 and 16×16×8 shapes");
  typedef detail::Dims<Use, M, N, K> dims;
  typedef T elem;
  typedef Layout layout;
  typedef typename detail::Elem<T>::type element_type;
  enum { num_elements = dims::rows * dims::cols / 32 };
  element_type x[num_elements];
};

namespace detail {

// slots returns fragment type F's mapping: slot lane·num_elements + i holds
// element slots()[slot] of the matrix (row-major index). A Fisher–Yates
// shuffle seeded by the type: fixed for a type, different between types.
template <class F>
const int* slots() {
  typedef typename F::dims D;
  static int map[D::rows * D::cols];
  static bool made = false;
  if (!made) {
    uint64_t seed = 0x9e3779b97f4a7c15ull * (1 + D::use + 3 * LayoutOf<typename F::layout>::id + 11 * Elem<typename F::elem>::kind);
    for (int e = 0; e < D::rows * D::cols; e++) map[e] = e;
    for (int e = D::rows * D::cols - 1; e > 0; e--) {
      seed ^= seed >> 31;
      seed *= 0xbf58476d1ce4e5b9ull;
      seed ^= seed >> 27;
      int j = (int)(seed % (uint64_t)(e + 1));
      int t = map[e];
      map[e] = map[j];
      map[j] = t;
    }
    made = true;
  }
  return map;
}

// MemOp is one lane's part of a load or store: its fragment's elements,
// the matrix in memory and its layout.
struct MemOp : emu::Collective {
  void* x;
  void* mem;
  unsigned ldm;
  bool col, store;
};

// widen is the fp32 value the tensor cores multiply for element v.
template <class F>
float widen(typename F::element_type v) {
  constexpr int kind = Elem<typename F::elem>::kind;
  if constexpr (kind == 1)
    return emu::from_bits<float>((uint64_t)v << 16);
  else if constexpr (kind == 2)
    return emu::from_bits<float>(emu::to_bits(v) & 0xffffe000u);
  else
    return v;
}

// check_mem reports (collective_fail) lanes that disagree on the matrix,
// or a pointer or leading dimension CUDA does not allow; true when fine.
template <class F>
bool check_mem(const MemOp* const* lanes, const char* what) {
  const MemOp* a = lanes[0];
  for (int l = 1; l < 32; l++)
    if (lanes[l]->mem != a->mem || lanes[l]->ldm != a->ldm || lanes[l]->col != a->col) {
      emu::collective_fail(what);
      return false;
    }
  if ((uintptr_t)a->mem % 32 != 0) {
    emu::collective_fail("a WMMA load or store needs a 256-bit aligned pointer");
    return false;
  }
  if (a->ldm * sizeof(typename F::element_type) % 16 != 0) {
    emu::collective_fail("a WMMA leading dimension must be a multiple of 16 bytes");
    return false;
  }
  return true;
}

// run_mem moves the warp's fragment of type F from or to memory.
template <class F>
void run_mem(emu::Collective* const* parts) {
  const MemOp* const* lanes = reinterpret_cast<const MemOp* const*>(parts);
  if (!check_mem<F>(lanes, "lanes of a WMMA load or store name different matrices, leading dimensions or layouts")) return;
  typedef typename F::dims D;
  typedef typename F::element_type E;
  const int* map = slots<F>();
  E* mem = static_cast<E*>(lanes[0]->mem);
  const size_t ldm = lanes[0]->ldm;
  for (int l = 0; l < 32; l++) {
    E* x = static_cast<E*>(lanes[l]->x);
    for (int i = 0; i < F::num_elements; i++) {
      const int e = map[l * F::num_elements + i], r = e / D::cols, c = e % D::cols;
      E* at = mem + (lanes[0]->col ? c * ldm + r : r * ldm + c);
      if (lanes[0]->store)
        *at = x[i];
      else
        x[i] = *at;
    }
  }
}

template <class F>
void mem_op(F& f, const void* p, unsigned ldm, bool col, bool store, const char* what) {
  MemOp op;
  op.run = &run_mem<F>;
  op.what = what;
  op.x = f.x;
  op.mem = const_cast<void*>(p);
  op.ldm = ldm;
  op.col = col;
  op.store = store;
  emu::warp_collective(&op);
}

// MmaOp is one lane's part of a product: its fragments.
struct MmaOp : emu::Collective {
  void* d;
  const void *a, *b, *c;
};

// gather widens the warp's fragment of type F (lane l's elements at x[l])
// into a row-major matrix.
template <class F>
void gather(float* m, const void* const* x) {
  const int* map = slots<F>();
  for (int l = 0; l < 32; l++)
    for (int i = 0; i < F::num_elements; i++)
      m[map[l * F::num_elements + i]] = widen<F>(static_cast<const typename F::element_type*>(x[l])[i]);
}

template <class FD, class FA, class FB>
void run_mma(emu::Collective* const* parts) {
  const MmaOp* const* lanes = reinterpret_cast<const MmaOp* const*>(parts);
  constexpr int M = FD::dims::rows, N = FD::dims::cols, K = FA::dims::cols;
  float a[M * K], b[K * N], c[M * N];
  const void *xa[32], *xb[32], *xc[32];
  for (int l = 0; l < 32; l++) {
    xa[l] = lanes[l]->a;
    xb[l] = lanes[l]->b;
    xc[l] = lanes[l]->c;
  }
  gather<FA>(a, xa);
  gather<FB>(b, xb);
  gather<FD>(c, xc);  // before any d is written: d may be c
  const int* map = slots<FD>();
  for (int l = 0; l < 32; l++) {
    float* d = static_cast<float*>(lanes[l]->d);
    for (int i = 0; i < FD::num_elements; i++) {
      const int e = map[l * FD::num_elements + i], r = e / N, col = e % N;
      float s = c[e];
      for (int k = 0; k < K; k++) s += a[r * K + k] * b[k * N + col];
      d[i] = s;
    }
  }
}

}  // namespace detail

template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
  for (int i = 0; i < fragment<Use, M, N, K, T, L>::num_elements; i++) f.x[i] = (typename fragment<Use, M, N, K, T, L>::element_type)v;
}

// load_matrix_sync of a matrix_a or matrix_b fragment: layout L.
template <class Use, int M, int N, int K, class T, class L>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const typename fragment<Use, M, N, K, T, L>::element_type* p, unsigned ldm) {
  static_assert(detail::LayoutOf<L>::id != 0, "an accumulator's load takes a layout_t");
  detail::mem_op(f, p, ldm, detail::LayoutOf<L>::id == 2, false, "load_matrix_sync");
}

template <int M, int N, int K>
inline void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout) {
  detail::mem_op(f, p, ldm, layout == mem_col_major, false, "load_matrix_sync");
}

template <int M, int N, int K>
inline void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout) {
  detail::mem_op(const_cast<fragment<accumulator, M, N, K, float>&>(f), p, ldm, layout == mem_col_major, true, "store_matrix_sync");
}

template <int M, int N, int K, class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
                     const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, float>& c) {
  static_assert((K == 16 && detail::Elem<T>::kind == 1) || (K == 8 && detail::Elem<T>::kind == 2),
                "the emulator's products: bf16 16×16×16, TF32 16×16×8");
  detail::MmaOp op;
  op.run = &detail::run_mma<fragment<accumulator, M, N, K, float>, fragment<matrix_a, M, N, K, T, LA>, fragment<matrix_b, M, N, K, T, LB>>;
  op.what = "mma_sync";
  op.d = d.x;
  op.a = a.x;
  op.b = b.x;
  op.c = c.x;
  emu::warp_collective(&op);
}

}  // namespace wmma
