// attention_tc.cuh: attention.cuh's kernels on the tensor cores (wmma.cuh):
// the same rows, shapes, arguments and results (att and lse forward; dqkv
// backward, after attention_backward_delta), with the products q·kᵀ, p·v,
// datt·vᵀ, ds·k, pᵀ·datt and dsᵀ·q in bf16 (16×16×16) or TF32 (16×16×8)
// with fp32 sums; softmax, exponentials and sums in fp32 on CUDA cores.
//
// Tiling (FlashAttention-2 style): a block of 4 warps owns 64 rows (query
// rows forward and for dq, key rows for dkv), a warp 16 of them; the other
// side streams through shared memory in tiles of 64 rows, rounded to the
// products' precision as they are loaded. A warp's 16×64 products go
// through its own fp32 tile in shared memory, where lane 2r+h does the
// softmax arithmetic of row r, columns h, h+2, ... (so no code depends on
// which lane holds which fragment element: see wmma.cuh); the online
// softmax rescales the output fragments by multiplying them element-wise
// with a fragment loaded from a tile whose row r holds row r's factor.
// The backward recomputes p = e^{s·scale − lse} from the forward's lse, as
// attention.cuh does, in two kernels that each own what they write: no
// atomics, so runs are bit-identical.
//
// Launch (kernels.Attention* with AttnShape.Math TF32 or BF16): block 128;
// grid (ceil(T/64), H, B) forward and dq, (ceil(T/64), G, B) dkv; dynamic
// shared memory att_tc_shared<P, E>(kernel) bytes (kernels.tcShared).

#ifndef MGRPO_EMU
#define EMU_CHECK_SHARED(bytes)  // the emulator's check of the launcher's shared memory (emu.h)
#endif

#define ATC_ROWS 64   // rows of a block (4 warps of 16) and of a streamed tile
#define ATC_WARPS 4
#define ATC_SLD (ATC_ROWS + 4)  // the row stride of a warp's fp32 product tile

// AttBF16 and AttTF32 are the products' precisions: what the operand tiles
// hold (T), the fragments' element type (W), a product's k (K), the
// operand rows' padding (16 bytes: against bank conflicts, keeping WMMA's
// 256-bit alignment) and the rounding of an fp32 input.
struct AttBF16 {
  typedef bf16 T;
  typedef bf16 W;
  static constexpr int K = 16, PAD = 8;
  __device__ static __forceinline__ T round(float x) { return f32_to_bf16(x); }
};
struct AttTF32 {
  typedef float T;
  typedef wmma::precision::tf32 W;
  static constexpr int K = 8, PAD = 4;
  __device__ static __forceinline__ T round(float x) { return f32_to_tf32(x); }
};

template <class P>
using atc_a = wmma::fragment<wmma::matrix_a, 16, 16, P::K, typename P::W, wmma::row_major>;
template <class P>
using atc_b = wmma::fragment<wmma::matrix_b, 16, 16, P::K, typename P::W, wmma::row_major>;
template <class P>
using atc_bt = wmma::fragment<wmma::matrix_b, 16, 16, P::K, typename P::W, wmma::col_major>;  // B as the rows of Bᵀ
template <class P>
using atc_acc = wmma::fragment<wmma::accumulator, 16, 16, P::K, float>;

// The kernels, for their shared-memory layouts.
enum AttTCKernel { kAttTCForward, kAttTCDq, kAttTCDkv };

// atc_bytes rounds a region up to 128 bytes, so that every region starts
// 256-bit aligned.
__host__ __device__ constexpr int atc_bytes(int bytes) { return (bytes + 127) / 128 * 128; }

// att_tc_shared is the dynamic shared memory of kernel k: 128 bytes of
// alignment slack; four operand tiles [64, E+PAD] (forward: three); each
// warp's fp32 product tile [16, 68] and operand tile [16, 64+PAD]; the
// forward's row factors [16, 16] a warp; dkv's lse and delta [64] each.
template <class P, int E>
__host__ __device__ constexpr int att_tc_shared(AttTCKernel k) {
  return 128 + (k == kAttTCForward ? 3 : 4) * atc_bytes(ATC_ROWS * (E + P::PAD) * (int)sizeof(typename P::T)) +
         ATC_WARPS * (atc_bytes(16 * ATC_SLD * 4) + atc_bytes(16 * (ATC_ROWS + P::PAD) * (int)sizeof(typename P::T))) +
         (k == kAttTCForward ? ATC_WARPS * atc_bytes(16 * 16 * 4) : 0) + (k == kAttTCDkv ? 2 * atc_bytes(ATC_ROWS * 4) : 0);
}

// AtcSmem hands out the regions of the launch's dynamic shared memory in
// order.
struct AtcSmem {
  unsigned char* at;
  __device__ AtcSmem(unsigned char* raw) : at((unsigned char*)(((size_t)raw + 127) & ~(size_t)127)) {}
  template <class X>
  __device__ X* take(int count) {
    X* p = (X*)at;
    at += atc_bytes(count * (int)sizeof(X));
    return p;
  }
};

// atc_load copies E columns from column col of rows row_of(i), i < count,
// of an fp32 [*, ld] matrix into a [64, E+PAD] tile, rounded to P's
// precision, zeros past count (so that a masked entry times a missing row
// is 0, not NaN). Four floats at a time: ld, col and the matrix are
// 16-byte aligned (E is a multiple of 16).
template <class P, int E, class RowOf>
__device__ __forceinline__ void atc_load(typename P::T* tile, const float* src, int ld, int col, int count, RowOf row_of) {
  constexpr int LD = E + P::PAD, V = E / 4;
  for (int x = threadIdx.x; x < ATC_ROWS * V; x += blockDim.x) {
    const int i = x / V, c = (x - i * V) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < count) v = *reinterpret_cast<const float4*>(src + (size_t)row_of(i) * ld + col + c);
    typename P::T* d = tile + i * LD + c;
    d[0] = P::round(v.x);
    d[1] = P::round(v.y);
    d[2] = P::round(v.z);
    d[3] = P::round(v.w);
  }
}

// atc_products writes the warp's [16, 64] product a·bᵀ to its fp32 tile
// (row stride ATC_SLD): a is 16 rows [16, E] and b 64 rows [64, E] of
// operand tiles.
template <class P, int E>
__device__ __forceinline__ void atc_products(float* sc, const typename P::T* a, const typename P::T* b) {
  constexpr int LD = E + P::PAD;
  atc_acc<P> s[ATC_ROWS / 16];
#pragma unroll
  for (int n = 0; n < ATC_ROWS / 16; n++) wmma::fill_fragment(s[n], 0.0f);
#pragma unroll 2
  for (int k = 0; k < E; k += P::K) {  // not unrolled fully: compile time (NVRTC runs at every start)
    atc_a<P> fa;
    wmma::load_matrix_sync(fa, a + k, LD);
#pragma unroll
    for (int n = 0; n < ATC_ROWS / 16; n++) {
      atc_bt<P> fb;
      wmma::load_matrix_sync(fb, b + n * 16 * LD + k, LD);
      wmma::mma_sync(s[n], fa, fb, s[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < ATC_ROWS / 16; n++) wmma::store_matrix_sync(sc + n * 16, s[n], ATC_SLD, wmma::mem_row_major);
}

// atc_accumulate adds a·b to the warp's [16, E] fragments o: a is the
// warp's [16, 64] operand tile (row stride 64+PAD), b a [64, E] operand
// tile.
template <class P, int E>
__device__ __forceinline__ void atc_accumulate(atc_acc<P> (&o)[E / 16], const typename P::T* a, const typename P::T* b) {
  constexpr int LD = E + P::PAD, PLD = ATC_ROWS + P::PAD;
#pragma unroll 2
  for (int k = 0; k < ATC_ROWS; k += P::K) {
    atc_a<P> fa;
    wmma::load_matrix_sync(fa, a + k, PLD);
#pragma unroll
    for (int f = 0; f < E / 16; f++) {
      atc_b<P> fb;
      wmma::load_matrix_sync(fb, b + k * LD + f * 16, LD);
      wmma::mma_sync(o[f], fa, fb, o[f]);
    }
  }
}

// atc_store writes scale·o, the warp's [16, E] fragments, to column col of
// rows row0..row0+rows−1 of an fp32 [*, ld] matrix (rows ≤ 16) through its
// product tile sc: lane 2r+h writes row r's columns h·8..h·8+7 of each 16.
template <class P, int E>
__device__ __forceinline__ void atc_store(float* dst, size_t ld, size_t row0, int col, int rows, atc_acc<P> (&o)[E / 16],
                                          float* sc, float scale) {
  const int lane = threadIdx.x & 31, r = lane >> 1, h = lane & 1;
#pragma unroll
  for (int f = 0; f < E / 16; f++) {
    wmma::store_matrix_sync(sc, o[f], ATC_SLD, wmma::mem_row_major);
    __syncwarp();
    if (r < rows)
#pragma unroll
      for (int c = 0; c < 8; c++) dst[(row0 + r) * ld + col + f * 16 + h * 8 + c] = sc[r * ATC_SLD + h * 8 + c] * scale;
    __syncwarp();
  }
}

// atc_online_softmax is lane 2r+h's part of one key tile's online softmax
// for the warp's row r (query position qpos): from the scores in sc (keys
// j0.., count of them), the probabilities e^{s·scale − m_new} rounded
// into pt, row r's factor α = e^{m_old − m_new} into the factor tile ft,
// and the running max m and sum l updated.
template <class P>
__device__ __forceinline__ void atc_online_softmax(const float* sc, typename P::T* pt, float* ft, int j0, int count,
                                                   int qpos, float scale, float& m, float& l) {
  constexpr int PLD = ATC_ROWS + P::PAD;
  const int lane = threadIdx.x & 31, r = lane >> 1, h = lane & 1;
  float p[ATC_ROWS / 2], mx = -INFINITY;
#pragma unroll
  for (int c = 0; c < ATC_ROWS / 2; c++) {
    const int col = 2 * c + h;
    p[c] = col < count && j0 + col <= qpos ? sc[r * ATC_SLD + col] * scale : -INFINITY;
    mx = fmaxf(mx, p[c]);
  }
  // finite: tile 0 holds key 0, which every row reads, so m is finite from then on
  const float mnew = fmaxf(m, fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1))), alpha = expf(m - mnew);
  float sum = 0;
#pragma unroll
  for (int c = 0; c < ATC_ROWS / 2; c++) {
    p[c] = expf(p[c] - mnew);
    sum += p[c];
    pt[r * PLD + 2 * c + h] = P::round(p[c]);
  }
  l = l * alpha + (sum + __shfl_xor_sync(FULL_MASK, sum, 1));
  m = mnew;
#pragma unroll
  for (int c = 0; c < 8; c++) ft[r * 16 + h * 8 + c] = alpha;
}

// atc_rescale multiplies row r of the warp's [16, E] fragments o by row r
// of the factor tile ft ([16, 16], row r holding row r's factor): loaded
// as a fragment of o's type, whose element mapping is o's, and multiplied
// element by element.
template <class P, int E>
__device__ __forceinline__ void atc_rescale(atc_acc<P> (&o)[E / 16], const float* ft) {
  atc_acc<P> fa;
  wmma::load_matrix_sync(fa, ft, 16, wmma::mem_row_major);
#pragma unroll
  for (int f = 0; f < E / 16; f++)
#pragma unroll
    for (int i = 0; i < fa.num_elements; i++) o[f].x[i] *= fa.x[i];
}

// attention_forward_tc: attention_forward on the tensor cores (same
// results, to the products' precision). Lane 2r+h keeps row r's running
// max m and sum l; o holds the unnormalised output, rescaled by
// α = e^{m_old − m_new} through the warp's factor tile.
template <class P, int E>
__device__ __forceinline__ void attention_forward_tc(float* att, float* lse, const float* qkv, const int* start,
                                                     const int* pre_, const int* from_, int H, int G, float scale) {
  typedef typename P::T T;
  constexpr int LD = E + P::PAD, PLD = ATC_ROWS + P::PAD;
  const int b = blockIdx.z, hd = blockIdx.y, i0 = blockIdx.x * ATC_ROWS;
  const AttSeq s(start, pre_, from_, b);
  if (i0 >= s.n) return;  // the whole block
  EMU_CHECK_SHARED((att_tc_shared<P, E>(kAttTCForward)));
  const int g = hd / (H / G), qs = (H + 2 * G) * E, he = H * E;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rows = min(ATC_ROWS, s.n - i0);
  DYNAMIC_SHARED(unsigned char, raw);
  AtcSmem sm(raw);
  T* qt = sm.take<T>(ATC_ROWS * LD);
  T* kt = sm.take<T>(ATC_ROWS * LD);
  T* vt = sm.take<T>(ATC_ROWS * LD);
  for (int w = 0; w < warp; w++) sm.take<float>(16 * ATC_SLD), sm.take<T>(16 * PLD), sm.take<float>(256);
  float* sc = sm.take<float>(16 * ATC_SLD);  // the warp's scores
  T* pt = sm.take<T>(16 * PLD);              // its probabilities
  float* ft = sm.take<float>(256);           // its row factors
  atc_load<P, E>(qt, qkv, qs, hd * E, rows, [&](int i) { return s.first + i0 + i; });
  const int wi = warp * 16, r = lane >> 1, h = lane & 1;
  const int qpos = s.pre + i0 + wi + r, wlast = s.pre + i0 + wi + 15;  // padding rows past `rows` included
  const bool active = wi < rows;                                       // the same in every lane of the warp
  float m = -INFINITY, l = 0;
  atc_acc<P> o[E / 16];
#pragma unroll
  for (int f = 0; f < E / 16; f++) wmma::fill_fragment(o[f], 0.0f);
  const int nkeys = s.pre + i0 + rows;  // the block's last query reads keys 0..nkeys−1
  for (int j0 = 0; j0 < nkeys; j0 += ATC_ROWS) {
    const int count = min(ATC_ROWS, nkeys - j0);
    __syncthreads();  // the previous tile is used up
    atc_load<P, E>(kt, qkv, qs, (H + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    atc_load<P, E>(vt, qkv, qs, (H + G + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    __syncthreads();
    if (!active || j0 > wlast) continue;  // nothing of this tile for the warp
    atc_products<P, E>(sc, qt + wi * LD, kt);
    __syncwarp();
    atc_online_softmax<P>(sc, pt, ft, j0, count, qpos, scale, m, l);
    __syncwarp();
    atc_rescale<P, E>(o, ft);
    atc_accumulate<P, E>(o, pt, vt);
  }
  if (!active) return;
  __syncwarp();  // o / l: row r's factor 1/l through the factor tile, then out through the score tile
#pragma unroll
  for (int c = 0; c < 8; c++) ft[r * 16 + h * 8 + c] = 1.0f / l;
  __syncwarp();
  atc_rescale<P, E>(o, ft);
  atc_store<P, E>(att, he, s.first + i0 + wi, hd * E, min(16, rows - wi), o, sc, 1.0f);
  if (h == 0 && wi + r < rows) lse[(size_t)(s.first + i0 + wi + r) * H + hd] = m + logf(l);
}

// attention_backward_dq_tc: attention_backward_dq on the tensor cores. Per
// tile of 64 keys the warp computes s = q·kᵀ and dp = datt·vᵀ through its
// product tile, ds = p·(dp − delta) into its operand tile, and
// dq += ds·k.
template <class P, int E>
__device__ __forceinline__ void attention_backward_dq_tc(float* dqkv, const float* datt, const float* qkv,
                                                         const float* lse, const float* delta, const int* start,
                                                         const int* pre_, const int* from_, int H, int G, float scale) {
  typedef typename P::T T;
  constexpr int LD = E + P::PAD, PLD = ATC_ROWS + P::PAD;
  const int b = blockIdx.z, hd = blockIdx.y, i0 = blockIdx.x * ATC_ROWS;
  const AttSeq s(start, pre_, from_, b);
  if (i0 >= s.n) return;
  EMU_CHECK_SHARED((att_tc_shared<P, E>(kAttTCDq)));
  const int g = hd / (H / G), qs = (H + 2 * G) * E, he = H * E;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rows = min(ATC_ROWS, s.n - i0);
  DYNAMIC_SHARED(unsigned char, raw);
  AtcSmem sm(raw);
  T* qt = sm.take<T>(ATC_ROWS * LD);
  T* ot = sm.take<T>(ATC_ROWS * LD);  // datt of the block's rows
  T* kt = sm.take<T>(ATC_ROWS * LD);
  T* vt = sm.take<T>(ATC_ROWS * LD);
  for (int w = 0; w < warp; w++) sm.take<float>(16 * ATC_SLD), sm.take<T>(16 * PLD);
  float* sc = sm.take<float>(16 * ATC_SLD);
  T* pt = sm.take<T>(16 * PLD);
  atc_load<P, E>(qt, qkv, qs, hd * E, rows, [&](int i) { return s.first + i0 + i; });
  atc_load<P, E>(ot, datt, he, hd * E, rows, [&](int i) { return s.first + i0 + i; });
  const int wi = warp * 16, r = lane >> 1, h = lane & 1;
  const int qpos = s.pre + i0 + wi + r, wlast = s.pre + i0 + wi + 15;
  const bool active = wi < rows, mine = wi + r < rows;
  const size_t row = (size_t)(s.first + i0 + min(wi + r, rows - 1));
  const float ls = lse[row * H + hd], dl = delta[row * H + hd];
  atc_acc<P> dq[E / 16];
#pragma unroll
  for (int f = 0; f < E / 16; f++) wmma::fill_fragment(dq[f], 0.0f);
  const int nkeys = s.pre + i0 + rows;
  for (int j0 = 0; j0 < nkeys; j0 += ATC_ROWS) {
    const int count = min(ATC_ROWS, nkeys - j0);
    __syncthreads();
    atc_load<P, E>(kt, qkv, qs, (H + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    atc_load<P, E>(vt, qkv, qs, (H + G + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    __syncthreads();
    if (!active || j0 > wlast) continue;
    atc_products<P, E>(sc, qt + wi * LD, kt);
    __syncwarp();
    float p[ATC_ROWS / 2];
#pragma unroll
    for (int c = 0; c < ATC_ROWS / 2; c++) {
      const int col = 2 * c + h;
      p[c] = mine && col < count && j0 + col <= qpos ? expf(sc[r * ATC_SLD + col] * scale - ls) : 0.0f;
    }
    __syncwarp();  // every lane has read s before dp overwrites it
    atc_products<P, E>(sc, ot + wi * LD, vt);
    __syncwarp();
#pragma unroll
    for (int c = 0; c < ATC_ROWS / 2; c++) pt[r * PLD + 2 * c + h] = P::round(p[c] * (sc[r * ATC_SLD + 2 * c + h] - dl));
    __syncwarp();
    atc_accumulate<P, E>(dq, pt, kt);
  }
  if (!active) return;
  atc_store<P, E>(dqkv, qs, s.first + i0 + wi, hd * E, min(16, rows - wi), dq, sc, scale);
}

// atc_dkv_tile adds to the warp's dk and dv (16 of the block's keys, own
// indices k0+kk0..) what one tile of up to 64 query rows of head hd
// contributes: dv += pᵀ·datt, dk += dsᵀ·q over the pairs where query q
// reads key k (k < klimit; k ≤ q when causal, own indices). The tile's
// rows are rowbase..rowbase+count−1, its first own index q0. Lane 2r+h
// works on the warp's key r and the tile's queries h, h+2, ...
template <class P, int E>
__device__ __forceinline__ void atc_dkv_tile(atc_acc<P> (&dk)[E / 16], atc_acc<P> (&dv)[E / 16], const typename P::T* kt,
                                             const typename P::T* vt, typename P::T* qt, typename P::T* ot, float* ls,
                                             float* dl, float* sc, typename P::T* pt, const float* qkv, const float* datt,
                                             const float* lse, const float* delta, int H, int G, int hd, int rowbase,
                                             int count, int q0, int k0, int keys, int klimit, bool causal, float scale) {
  constexpr int LD = E + P::PAD, PLD = ATC_ROWS + P::PAD;
  const int qs = (H + 2 * G) * E, he = H * E, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous tile is used up
  atc_load<P, E>(qt, qkv, qs, hd * E, count, [&](int i) { return rowbase + i; });
  atc_load<P, E>(ot, datt, he, hd * E, count, [&](int i) { return rowbase + i; });
  for (int i = threadIdx.x; i < ATC_ROWS; i += blockDim.x) {
    ls[i] = i < count ? lse[(size_t)(rowbase + i) * H + hd] : 0.0f;
    dl[i] = i < count ? delta[(size_t)(rowbase + i) * H + hd] : 0.0f;
  }
  __syncthreads();
  const int kk0 = warp * 16, r = lane >> 1, h = lane & 1, key = k0 + kk0 + r;
  if (kk0 >= keys || k0 + kk0 >= klimit || (causal && k0 + kk0 > q0 + count - 1)) return;  // the same in every lane
  const bool mine = kk0 + r < keys && key < klimit;
  atc_products<P, E>(sc, kt + kk0 * LD, qt);  // sᵀ: the warp's keys by the tile's queries
  __syncwarp();
  float p[ATC_ROWS / 2];
#pragma unroll
  for (int c = 0; c < ATC_ROWS / 2; c++) {
    const int col = 2 * c + h;
    p[c] = mine && col < count && (!causal || key <= q0 + col) ? expf(sc[r * ATC_SLD + col] * scale - ls[col]) : 0.0f;
    pt[r * PLD + col] = P::round(p[c]);
  }
  __syncwarp();
  atc_accumulate<P, E>(dv, pt, ot);
  __syncwarp();  // pᵀ is used up
  atc_products<P, E>(sc, vt + kk0 * LD, ot);  // dpᵀ
  __syncwarp();
#pragma unroll
  for (int c = 0; c < ATC_ROWS / 2; c++) {
    const int col = 2 * c + h;
    pt[r * PLD + col] = P::round(p[c] * (sc[r * ATC_SLD + col] - dl[col]));
  }
  __syncwarp();
  atc_accumulate<P, E>(dk, pt, qt);
  __syncwarp();
}

// atc_next_reader returns the sequence after b2 that reads some of keys
// k0.. of sequence s (its own rows) as shared prompt keys, or −1: only a
// group's first sequence lends its prompt, to the later sequences of the
// group (pre > 0, from = its first row) whose prompt reaches key k0.
__device__ __forceinline__ int atc_next_reader(const AttSeq& s, int b2, int k0, const int* pre_, const int* from_) {
  if (s.pre > 0) return -1;
  for (int b3 = b2 + 1; b3 < (int)gridDim.z && pre_[b3] > 0 && from_[b3] == s.first; b3++)
    if (k0 < pre_[b3]) return b3;
  return -1;
}

// attention_backward_dkv_tc: attention_backward_dkv on the tensor cores,
// over the same query rows (the group's query heads; a group's first
// sequence also over the later sequences that share its prompt).
template <class P, int E>
__device__ __forceinline__ void attention_backward_dkv_tc(float* dqkv, const float* datt, const float* qkv,
                                                          const float* lse, const float* delta, const int* start,
                                                          const int* pre_, const int* from_, int H, int G, float scale) {
  typedef typename P::T T;
  constexpr int LD = E + P::PAD, PLD = ATC_ROWS + P::PAD;
  const int b = blockIdx.z, g = blockIdx.y, k0 = blockIdx.x * ATC_ROWS;
  const AttSeq s(start, pre_, from_, b);
  if (k0 >= s.n) return;
  EMU_CHECK_SHARED((att_tc_shared<P, E>(kAttTCDkv)));
  const int qs = (H + 2 * G) * E, warp = threadIdx.x >> 5, keys = min(ATC_ROWS, s.n - k0);
  DYNAMIC_SHARED(unsigned char, raw);
  AtcSmem sm(raw);
  T* kt = sm.take<T>(ATC_ROWS * LD);
  T* vt = sm.take<T>(ATC_ROWS * LD);
  T* qt = sm.take<T>(ATC_ROWS * LD);
  T* ot = sm.take<T>(ATC_ROWS * LD);
  float* ls = sm.take<float>(ATC_ROWS);
  float* dl = sm.take<float>(ATC_ROWS);
  for (int w = 0; w < warp; w++) sm.take<float>(16 * ATC_SLD), sm.take<T>(16 * PLD);
  float* sc = sm.take<float>(16 * ATC_SLD);
  T* pt = sm.take<T>(16 * PLD);
  atc_load<P, E>(kt, qkv, qs, (H + g) * E, keys, [&](int i) { return s.first + k0 + i; });
  atc_load<P, E>(vt, qkv, qs, (H + G + g) * E, keys, [&](int i) { return s.first + k0 + i; });
  atc_acc<P> dk[E / 16], dv[E / 16];
#pragma unroll
  for (int f = 0; f < E / 16; f++) {
    wmma::fill_fragment(dk[f], 0.0f);
    wmma::fill_fragment(dv[f], 0.0f);
  }
  const int per = H / G;
  for (int hd = g * per; hd < (g + 1) * per; hd++) {
    // one call site (NVRTC's time): the own queries from the block's keys on, then each later sequence's
    for (int b2 = b, q0 = k0; b2 >= 0;) {
      const AttSeq t(start, pre_, from_, b2);
      if (q0 >= t.n) {
        b2 = atc_next_reader(s, b2, k0, pre_, from_);
        q0 = 0;
        continue;
      }
      atc_dkv_tile<P, E>(dk, dv, kt, vt, qt, ot, ls, dl, sc, pt, qkv, datt, lse, delta, H, G, hd, t.first + q0,
                         min(ATC_ROWS, t.n - q0), q0, k0, keys, b2 == b ? s.n : t.pre, b2 == b, scale);
      q0 += ATC_ROWS;
    }
  }
  const int kk0 = warp * 16;
  if (kk0 >= keys) return;
  const size_t row0 = (size_t)(s.first + k0 + kk0);
  atc_store<P, E>(dqkv, qs, row0, (H + g) * E, min(16, keys - kk0), dk, sc, scale);
  atc_store<P, E>(dqkv, qs, row0, (H + G + g) * E, min(16, keys - kk0), dv, sc, 1.0f);
}

// The kernels, one per precision (bf16, tf32) and head width E (32, 64,
// 128; 16 stays on the CUDA cores: each instance costs NVRTC about half a
// second at every start), written out (kernels.Names reads them).

extern "C" __global__ void __launch_bounds__(128) attention_forward_bf16_e32(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward_tc<AttBF16, 32>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dq_bf16_e32(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq_tc<AttBF16, 32>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dkv_bf16_e32(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv_tc<AttBF16, 32>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_bf16_e32)
EMU_REGISTER(attention_backward_dq_bf16_e32)
EMU_REGISTER(attention_backward_dkv_bf16_e32)

extern "C" __global__ void __launch_bounds__(128) attention_forward_bf16_e64(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward_tc<AttBF16, 64>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dq_bf16_e64(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq_tc<AttBF16, 64>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dkv_bf16_e64(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv_tc<AttBF16, 64>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_bf16_e64)
EMU_REGISTER(attention_backward_dq_bf16_e64)
EMU_REGISTER(attention_backward_dkv_bf16_e64)

extern "C" __global__ void __launch_bounds__(128) attention_forward_bf16_e128(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward_tc<AttBF16, 128>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dq_bf16_e128(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq_tc<AttBF16, 128>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dkv_bf16_e128(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv_tc<AttBF16, 128>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_bf16_e128)
EMU_REGISTER(attention_backward_dq_bf16_e128)
EMU_REGISTER(attention_backward_dkv_bf16_e128)

extern "C" __global__ void __launch_bounds__(128) attention_forward_tf32_e32(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward_tc<AttTF32, 32>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dq_tf32_e32(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq_tc<AttTF32, 32>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dkv_tf32_e32(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv_tc<AttTF32, 32>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_tf32_e32)
EMU_REGISTER(attention_backward_dq_tf32_e32)
EMU_REGISTER(attention_backward_dkv_tf32_e32)

extern "C" __global__ void __launch_bounds__(128) attention_forward_tf32_e64(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward_tc<AttTF32, 64>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dq_tf32_e64(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq_tc<AttTF32, 64>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dkv_tf32_e64(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv_tc<AttTF32, 64>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_tf32_e64)
EMU_REGISTER(attention_backward_dq_tf32_e64)
EMU_REGISTER(attention_backward_dkv_tf32_e64)

extern "C" __global__ void __launch_bounds__(128) attention_forward_tf32_e128(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward_tc<AttTF32, 128>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dq_tf32_e128(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq_tc<AttTF32, 128>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_backward_dkv_tf32_e128(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv_tc<AttTF32, 128>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_tf32_e128)
EMU_REGISTER(attention_backward_dq_tf32_e128)
EMU_REGISTER(attention_backward_dkv_tf32_e128)
