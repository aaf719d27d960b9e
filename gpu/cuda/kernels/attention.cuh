// Causal grouped-query attention over the packed rows of the CPU engine:
// the twins of attention and attentionBackward (gpu/attention.go), without
// the [T, T] probabilities. The forward pass keeps each (row, head)'s
// log-sum-exp; the backward pass recomputes the probabilities from it, in
// two kernels that each own what they write (dq by query tile, dk and dv by
// key tile), so no gradient is summed with atomics.
//
// Rows (gpu/policy.go's load): sequence b owns rows start[b]..start[b+1]−1.
// A later sequence of a group shares its first pre[b] positions (keys and
// values) with the group's first sequence: they are rows
// from[b]..from[b]+pre[b]−1, and its own rows hold positions pre[b] on.
// Key j of sequence b (positions in order) is row from[b]+j for j < pre[b],
// start[b]+j−pre[b] after; own row i is position pre[b]+i and reads keys
// 0..pre[b]+i.
//   qkv: [N, (H+2G)·E]: q heads, k heads, v heads (q and k rotated already)
//   att, datt: [N, H·E]   lse, delta: [N, H]   dqkv: [N, (H+2G)·E]
//   start: [B+1]   pre, from: [B]
// Query head h reads key/value head h/(H/G) (Hugging Face repeat_kv).
// Launch (kernels.Attention*): block 128 threads = 4 warps; grid
// (ceil(T/32), H, B) for the forward and dq kernels (a block per 32 query
// rows of one head of one sequence), (ceil(T/32), G, B) for dkv (a block
// per 32 key rows); T is the most rows of any sequence. Within a block a
// warp owns 8 rows and a lane owns E/32 of the head's columns; lane j
// takes key (or query) j of a 32-row tile in shared memory.

#define ATT_TILE 32                          // rows of a block; rows of a shared-memory tile
#define ATT_WARPS 4
#define ATT_PER_WARP (ATT_TILE / ATT_WARPS)  // rows a warp owns

// att_cols is how many of a head's E columns a lane owns: E/32, or one
// for E = 16 (lanes 16..31 then own none).
template <int E>
__host__ __device__ constexpr int att_cols() { return (E + 31) / 32; }

// att_col reports whether lane owns column lane + 32·c of a head of width E.
template <int E>
__device__ __forceinline__ bool att_col(int lane, int c) { return E % 32 == 0 || lane + 32 * c < E; }

// AttSeq is where sequence b's rows and keys are.
struct AttSeq {
  int first, n, pre, from;
  __device__ AttSeq(const int* start, const int* pre_, const int* from_, int b)
      : first(start[b]), n(start[b + 1] - start[b]), pre(pre_[b]), from(from_[b]) {}
  // key_row is the qkv row of key j.
  __device__ int key_row(int j) const { return j < pre ? from + j : first + j - pre; }
};

// load_tile copies E columns from column col of rows row_of(i), i < count,
// of a [*, ld] matrix into a [ATT_TILE, sld] tile, zeros past count (so
// that a masked entry times a missing row is 0, not NaN).
template <int E, class RowOf>
__device__ __forceinline__ void load_tile(float* tile, int sld, const float* src, int ld, int col, int count,
                                          RowOf row_of) {
  for (int x = threadIdx.x; x < ATT_TILE * E; x += blockDim.x) {
    const int i = x / E, c = x - i * E;
    tile[i * sld + c] = i < count ? src[(size_t)row_of(i) * ld + col + c] : 0.0f;
  }
}

// attention_forward: for own row i of sequence b and head h,
//   p_j = softmax_j(q_i·k_j·scale) over keys j ≤ pre+i,
//   att[i, h] = Σ_j p_j·v_j,   lse[i, h] = log Σ_j e^{q_i·k_j·scale}
// by an online softmax over tiles of 32 keys.
// Shared memory: q [32, E], k [32, E+1], v [32, E] floats.
template <int E>
__device__ __forceinline__ void attention_forward(float* att, float* lse, const float* qkv, const int* start,
                                                  const int* pre_, const int* from_, int H, int G, float scale) {
  constexpr int C = att_cols<E>();
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * ATT_TILE;
  const AttSeq s(start, pre_, from_, b);
  if (i0 >= s.n) return;  // the whole block
  const int g = h / (H / G), qs = (H + 2 * G) * E, he = H * E;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rows = min(ATT_TILE, s.n - i0);
  DYNAMIC_SHARED(float, smem);
  float* qt = smem;                     // the block's queries
  float* kt = qt + ATT_TILE * E;        // a tile of keys, padded: lane j reads row j
  float* vt = kt + ATT_TILE * (E + 1);  // their values
  load_tile<E>(qt, E, qkv, qs, h * E, rows, [&](int i) { return s.first + i0 + i; });
  float o[ATT_PER_WARP][C], m[ATT_PER_WARP], l[ATT_PER_WARP];
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++) {
    m[r] = -INFINITY;
    l[r] = 0;
#pragma unroll
    for (int c = 0; c < C; c++) o[r][c] = 0;
  }
  const int nkeys = s.pre + i0 + rows;  // the block's last query reads keys 0..nkeys−1
  for (int j0 = 0; j0 < nkeys; j0 += ATT_TILE) {
    const int count = min(ATT_TILE, nkeys - j0);
    __syncthreads();  // the previous tile is used up
    load_tile<E>(kt, E + 1, qkv, qs, (H + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    load_tile<E>(vt, E, qkv, qs, (H + G + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    __syncthreads();
#pragma unroll
    for (int r = 0; r < ATT_PER_WARP; r++) {
      const int i = warp * ATT_PER_WARP + r, qpos = s.pre + i0 + i;
      if (i >= rows || j0 > qpos) continue;  // the same in every lane of the warp
      const int j = j0 + lane;
      float sc = -INFINITY;
      if (j <= qpos) {
        float d = 0;
#pragma unroll 8
        for (int c = 0; c < E; c++) d += qt[i * E + c] * kt[lane * (E + 1) + c];
        sc = d * scale;
      }
      const float mnew = fmaxf(m[r], warp_max(sc));  // finite: key j0 ≤ qpos is in every tile read
      const float p = j <= qpos ? expf(sc - mnew) : 0.0f, alpha = expf(m[r] - mnew);
      l[r] = l[r] * alpha + warp_sum(p);
      m[r] = mnew;
#pragma unroll
      for (int c = 0; c < C; c++) o[r][c] *= alpha;
#pragma unroll 4
      for (int jj = 0; jj < ATT_TILE; jj++) {
        const float pj = __shfl_sync(FULL_MASK, p, jj);
#pragma unroll
        for (int c = 0; c < C; c++)
          if (att_col<E>(lane, c)) o[r][c] += pj * vt[jj * E + lane + 32 * c];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++) {
    const int i = warp * ATT_PER_WARP + r;
    if (i >= rows) continue;
    const size_t row = (size_t)(s.first + i0 + i);
#pragma unroll
    for (int c = 0; c < C; c++)
      if (att_col<E>(lane, c)) att[row * he + h * E + lane + 32 * c] = o[r][c] / l[r];
    if (lane == 0) lse[row * H + h] = m[r] + logf(l[r]);
  }
}

// attention_backward_delta: delta[r, h] = att[r, h]·datt[r, h] (= Σ_j p_j·dp_j,
// the row sum of dS's formula). One warp per (row, head).
// Launch: grid ceil(n·H/8), block 256.
extern "C" __global__ void attention_backward_delta(float* delta, const float* att, const float* datt, int n, int H,
                                                    int E) {
  const int idx = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (idx >= n * H) return;  // the whole warp
  const int r = idx / H, h = idx - r * H;
  const float* o = att + (size_t)r * H * E + h * E;
  const float* d = datt + (size_t)r * H * E + h * E;
  float s = 0;
  for (int c = lane; c < E; c += 32) s += o[c] * d[c];
  s = warp_sum(s);
  if (lane == 0) delta[(size_t)r * H + h] = s;
}
EMU_REGISTER(attention_backward_delta)

// attention_backward_dq: for own row i and head h, with p_j = e^{q_i·k_j·scale − lse},
// dp_j = datt_i·v_j, ds_j = p_j·(dp_j − delta_i):
//   dq_i = scale·Σ_j ds_j·k_j   (wrt the rotated q: rope −1 follows).
// Shared memory: q [32, E], datt [32, E], k [32, E+1], v [32, E+1] floats.
template <int E>
__device__ __forceinline__ void attention_backward_dq(float* dqkv, const float* datt, const float* qkv,
                                                      const float* lse, const float* delta, const int* start,
                                                      const int* pre_, const int* from_, int H, int G, float scale) {
  constexpr int C = att_cols<E>();
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * ATT_TILE;
  const AttSeq s(start, pre_, from_, b);
  if (i0 >= s.n) return;
  const int g = h / (H / G), qs = (H + 2 * G) * E, he = H * E;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rows = min(ATT_TILE, s.n - i0);
  DYNAMIC_SHARED(float, smem);
  float* qt = smem;
  float* ot = qt + ATT_TILE * E;        // datt of the block's rows
  float* kt = ot + ATT_TILE * E;        // padded: lane j reads row j
  float* vt = kt + ATT_TILE * (E + 1);  // padded
  load_tile<E>(qt, E, qkv, qs, h * E, rows, [&](int i) { return s.first + i0 + i; });
  load_tile<E>(ot, E, datt, he, h * E, rows, [&](int i) { return s.first + i0 + i; });
  float dq[ATT_PER_WARP][C], ls[ATT_PER_WARP], dl[ATT_PER_WARP];
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++) {
    const int i = min(warp * ATT_PER_WARP + r, rows - 1);
    ls[r] = lse[(size_t)(s.first + i0 + i) * H + h];
    dl[r] = delta[(size_t)(s.first + i0 + i) * H + h];
#pragma unroll
    for (int c = 0; c < C; c++) dq[r][c] = 0;
  }
  const int nkeys = s.pre + i0 + rows;
  for (int j0 = 0; j0 < nkeys; j0 += ATT_TILE) {
    const int count = min(ATT_TILE, nkeys - j0);
    __syncthreads();
    load_tile<E>(kt, E + 1, qkv, qs, (H + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    load_tile<E>(vt, E + 1, qkv, qs, (H + G + g) * E, count, [&](int j) { return s.key_row(j0 + j); });
    __syncthreads();
#pragma unroll
    for (int r = 0; r < ATT_PER_WARP; r++) {
      const int i = warp * ATT_PER_WARP + r, qpos = s.pre + i0 + i;
      if (i >= rows || j0 > qpos) continue;
      float ds = 0;
      if (j0 + lane <= qpos) {
        float sc = 0, dp = 0;
#pragma unroll 8
        for (int c = 0; c < E; c++) {
          sc += qt[i * E + c] * kt[lane * (E + 1) + c];
          dp += ot[i * E + c] * vt[lane * (E + 1) + c];
        }
        ds = expf(sc * scale - ls[r]) * (dp - dl[r]);
      }
#pragma unroll 4
      for (int jj = 0; jj < ATT_TILE; jj++) {
        const float dsj = __shfl_sync(FULL_MASK, ds, jj);
#pragma unroll
        for (int c = 0; c < C; c++)
          if (att_col<E>(lane, c)) dq[r][c] += dsj * kt[jj * (E + 1) + lane + 32 * c];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++) {
    const int i = warp * ATT_PER_WARP + r;
    if (i >= rows) continue;
#pragma unroll
    for (int c = 0; c < C; c++)
      if (att_col<E>(lane, c)) dqkv[(size_t)(s.first + i0 + i) * qs + h * E + lane + 32 * c] = dq[r][c] * scale;
  }
}

// dkv_tile adds to dk and dv (the warp's 8 keys of the block, att_cols
// columns a lane) what one tile of up to 32 query rows of head h contributes:
//   dv_k += Σ_q p_qk·datt_q,   dk_k += Σ_q ds_qk·q_q
// for the pairs where query q reads key k: k < klimit, and k ≤ q when
// causal (own indices). The tile's rows are rowbase..rowbase+count−1 and
// its first own index q0; the block's keys start at own index k0.
template <int E>
__device__ __forceinline__ void dkv_tile(float (&dk)[ATT_PER_WARP][att_cols<E>()], float (&dv)[ATT_PER_WARP][att_cols<E>()],
                                         const float* kt, const float* vt, float* qt, float* ot, float* ls, float* dl,
                                         const float* qkv, const float* datt, const float* lse, const float* delta,
                                         int H, int G, int h, int rowbase, int count, int q0, int k0, int keys,
                                         int klimit, bool causal, float scale) {
  constexpr int C = att_cols<E>();
  const int qs = (H + 2 * G) * E, he = H * E, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous tile is used up
  load_tile<E>(qt, E + 1, qkv, qs, h * E, count, [&](int i) { return rowbase + i; });
  load_tile<E>(ot, E + 1, datt, he, h * E, count, [&](int i) { return rowbase + i; });
  for (int i = threadIdx.x; i < ATT_TILE; i += blockDim.x) {
    ls[i] = i < count ? lse[(size_t)(rowbase + i) * H + h] : 0.0f;
    dl[i] = i < count ? delta[(size_t)(rowbase + i) * H + h] : 0.0f;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++) {
    const int kk = warp * ATT_PER_WARP + r;
    if (kk >= keys || k0 + kk >= klimit) continue;  // the same in every lane
    float p = 0, ds = 0;
    if (lane < count && (!causal || k0 + kk <= q0 + lane)) {
      float sc = 0, dp = 0;
#pragma unroll 8
      for (int c = 0; c < E; c++) {
        sc += qt[lane * (E + 1) + c] * kt[kk * E + c];
        dp += ot[lane * (E + 1) + c] * vt[kk * E + c];
      }
      p = expf(sc * scale - ls[lane]);
      ds = p * (dp - dl[lane]);
    }
#pragma unroll 4
    for (int jj = 0; jj < ATT_TILE; jj++) {
      const float pj = __shfl_sync(FULL_MASK, p, jj), dsj = __shfl_sync(FULL_MASK, ds, jj);
#pragma unroll
      for (int c = 0; c < C; c++) {
        if (!att_col<E>(lane, c)) continue;
        dv[r][c] += pj * ot[jj * (E + 1) + lane + 32 * c];
        dk[r][c] += dsj * qt[jj * (E + 1) + lane + 32 * c];
      }
    }
  }
}

// attention_backward_dkv: for own key row k of sequence b and kv head g,
// over the query heads of g and every query that reads it (its own
// sequence's rows from k on; for a group's first sequence, every row of
// the later sequences that share it as a prompt key),
//   dv_k = Σ p·datt_q,   dk_k = scale·Σ ds·q_q   (wrt the rotated k).
// Shared memory: k [32, E], v [32, E], q [32, E+1], datt [32, E+1],
// lse [32], delta [32] floats.
template <int E>
__device__ __forceinline__ void attention_backward_dkv(float* dqkv, const float* datt, const float* qkv,
                                                       const float* lse, const float* delta, const int* start,
                                                       const int* pre_, const int* from_, int H, int G, float scale) {
  constexpr int C = att_cols<E>();
  const int b = blockIdx.z, g = blockIdx.y, k0 = blockIdx.x * ATT_TILE;
  const AttSeq s(start, pre_, from_, b);
  if (k0 >= s.n) return;
  const int qs = (H + 2 * G) * E, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, keys = min(ATT_TILE, s.n - k0);
  DYNAMIC_SHARED(float, smem);
  float* kt = smem;
  float* vt = kt + ATT_TILE * E;
  float* qt = vt + ATT_TILE * E;        // padded: lane q reads row q
  float* ot = qt + ATT_TILE * (E + 1);  // padded
  float* ls = ot + ATT_TILE * (E + 1);
  float* dl = ls + ATT_TILE;
  load_tile<E>(kt, E, qkv, qs, (H + g) * E, keys, [&](int i) { return s.first + k0 + i; });
  load_tile<E>(vt, E, qkv, qs, (H + G + g) * E, keys, [&](int i) { return s.first + k0 + i; });
  float dk[ATT_PER_WARP][C], dv[ATT_PER_WARP][C];
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++)
#pragma unroll
    for (int c = 0; c < C; c++) dk[r][c] = dv[r][c] = 0;
  const int per = H / G;
  for (int h = g * per; h < (g + 1) * per; h++) {
    for (int q0 = k0; q0 < s.n; q0 += ATT_TILE)  // own queries: q ≥ k
      dkv_tile<E>(dk, dv, kt, vt, qt, ot, ls, dl, qkv, datt, lse, delta, H, G, h, s.first + q0,
                  min(ATT_TILE, s.n - q0), q0, k0, keys, s.n, true, scale);
    if (s.pre > 0) continue;  // only a group's first sequence lends its prompt
    for (int b2 = b + 1; b2 < (int)gridDim.z && pre_[b2] > 0 && from_[b2] == s.first; b2++) {
      const AttSeq s2(start, pre_, from_, b2);
      if (k0 >= s2.pre) continue;  // none of the block's keys is shared with b2
      for (int q0 = 0; q0 < s2.n; q0 += ATT_TILE)  // every query of b2 reads every shared key
        dkv_tile<E>(dk, dv, kt, vt, qt, ot, ls, dl, qkv, datt, lse, delta, H, G, h, s2.first + q0,
                    min(ATT_TILE, s2.n - q0), q0, k0, keys, s2.pre, false, scale);
    }
  }
#pragma unroll
  for (int r = 0; r < ATT_PER_WARP; r++) {
    const int kk = warp * ATT_PER_WARP + r;
    if (kk >= keys) continue;
    const size_t row = (size_t)(s.first + k0 + kk) * qs;
#pragma unroll
    for (int c = 0; c < C; c++) {
      if (!att_col<E>(lane, c)) continue;
      dqkv[row + (H + g) * E + lane + 32 * c] = dk[r][c] * scale;
      dqkv[row + (H + G + g) * E + lane + 32 * c] = dv[r][c];
    }
  }
}

// The kernels, one per head width E (16, 32, 64 or 128).
#define ATTENTION_ARGS const int *start, const int *pre, const int *from, int H, int G, float scale

extern "C" __global__ void attention_forward_e16(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward<16>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_forward_e32(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward<32>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_forward_e64(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward<64>(att, lse, qkv, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_forward_e128(float* att, float* lse, const float* qkv, ATTENTION_ARGS) {
  attention_forward<128>(att, lse, qkv, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_forward_e16)
EMU_REGISTER(attention_forward_e32)
EMU_REGISTER(attention_forward_e64)
EMU_REGISTER(attention_forward_e128)

#define ATTENTION_BACKWARD_ARGS \
  float *dqkv, const float *datt, const float *qkv, const float *lse, const float *delta, ATTENTION_ARGS

extern "C" __global__ void attention_backward_dq_e16(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq<16>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dq_e32(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq<32>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dq_e64(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq<64>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dq_e128(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dq<128>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dkv_e16(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv<16>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dkv_e32(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv<32>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dkv_e64(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv<64>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
extern "C" __global__ void attention_backward_dkv_e128(ATTENTION_BACKWARD_ARGS) {
  attention_backward_dkv<128>(dqkv, datt, qkv, lse, delta, start, pre, from, H, G, scale);
}
EMU_REGISTER(attention_backward_dq_e16)
EMU_REGISTER(attention_backward_dq_e32)
EMU_REGISTER(attention_backward_dq_e64)
EMU_REGISTER(attention_backward_dq_e128)
EMU_REGISTER(attention_backward_dkv_e16)
EMU_REGISTER(attention_backward_dkv_e32)
EMU_REGISTER(attention_backward_dkv_e64)
EMU_REGISTER(attention_backward_dkv_e128)
