// Decoding with a key/value cache: the twins of decoder.cacheKV and
// decoder.attend (gpu/sample.go). The cache of one layer holds, for each
// sequence slot and key/value head, the rotated keys (and the values) by
// position:
//   kc, vc: [S, G, tmax, E]   qkv: [r, (H+2G)·E]   slot, pos: [r]

// kv_append copies the rotated keys and the values of rows 0..r−1 into
// their slot's cache at their position.
// Launch: grid r, block 128 (any size).
extern "C" __global__ void kv_append(float* kc, float* vc, const float* qkv, const int* slot, const int* pos, int r, int H,
                                     int G, int E, int tmax) {
  const int i = blockIdx.x;
  if (i >= r) return;
  const float* row = qkv + (size_t)i * (H + 2 * G) * E;
  for (int x = threadIdx.x; x < G * E; x += blockDim.x) {
    const int g = x / E, c = x - g * E;
    const size_t at = (((size_t)slot[i] * G + g) * tmax + pos[i]) * E + c;
    kc[at] = row[(H + g) * E + c];
    vc[at] = row[(H + G + g) * E + c];
  }
}
EMU_REGISTER(kv_append)

// decode_attention: for output k < r, the query of row i = rows[k] (rows
// null: i = k) and head h attends over its slot's cached keys 0..pos[i]:
//   att[k, h] = softmax(q·Kᵀ·scale)·V.
// Each of the block's 4 warps runs an online softmax over every 4th tile of
// 32 keys (lane j takes key j), then the warps' partial results are
// combined in warp order: no atomics.
//   att: [r, H·E]   qkv: [*, (H+2G)·E]   kc, vc: [S, G, tmax, E]
// Launch: grid (r, H), block 128; dynamic shared memory (E + 4·(E+2))
// floats.
template <int E>
__device__ __forceinline__ void decode_attention(float* att, const float* qkv, const float* kc, const float* vc,
                                                 const int* slot, const int* pos, const int* rows, int r, int H, int G,
                                                 int tmax, float scale) {
  constexpr int C = att_cols<E>(), WARPS = 4;
  const int k = blockIdx.x, h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (k >= r) return;
  const int i = rows ? rows[k] : k, g = h / (H / G), n = pos[i] + 1;
  const size_t base = ((size_t)slot[i] * G + g) * tmax * E;
  DYNAMIC_SHARED(float, smem);
  float* q = smem;                       // [E]
  float* part = q + E;                   // [WARPS, E+2]: each warp's o, then m and l
  for (int c = threadIdx.x; c < E; c += blockDim.x) q[c] = qkv[(size_t)i * (H + 2 * G) * E + h * E + c];
  __syncthreads();
  float o[C], m = -INFINITY, l = 0;
#pragma unroll
  for (int c = 0; c < C; c++) o[c] = 0;
  for (int j0 = warp * 32; j0 < n; j0 += WARPS * 32) {
    const int j = j0 + lane;
    float sc = -INFINITY;
    if (j < n) {
      const float* kj = kc + base + (size_t)j * E;
      float d = 0;
#pragma unroll 8
      for (int c = 0; c < E; c++) d += q[c] * kj[c];
      sc = d * scale;
    }
    const float mnew = fmaxf(m, warp_max(sc));  // key j0 < n is in every tile read
    const float p = j < n ? expf(sc - mnew) : 0.0f, alpha = expf(m - mnew);
    l = l * alpha + warp_sum(p);
    m = mnew;
#pragma unroll
    for (int c = 0; c < C; c++) o[c] *= alpha;
    const int count = min(32, n - j0);
    for (int jj = 0; jj < count; jj++) {
      const float pj = __shfl_sync(FULL_MASK, p, jj);
      const float* vj = vc + base + (size_t)(j0 + jj) * E;
#pragma unroll
      for (int c = 0; c < C; c++)
        if (att_col<E>(lane, c)) o[c] += pj * vj[lane + 32 * c];
    }
  }
  float* mine = part + warp * (E + 2);
#pragma unroll
  for (int c = 0; c < C; c++)
    if (att_col<E>(lane, c)) mine[lane + 32 * c] = o[c];
  if (lane == 0) {
    mine[E] = m;   // −∞ and 0 for a warp with no keys
    mine[E + 1] = l;
  }
  __syncthreads();
  float mt = -INFINITY;
  for (int w = 0; w < WARPS; w++) mt = fmaxf(mt, part[w * (E + 2) + E]);
  float lt = 0;
  for (int w = 0; w < WARPS; w++) lt += part[w * (E + 2) + E + 1] * expf(part[w * (E + 2) + E] - mt);
  for (int c = threadIdx.x; c < E; c += blockDim.x) {
    float s = 0;
    for (int w = 0; w < WARPS; w++) s += part[w * (E + 2) + c] * expf(part[w * (E + 2) + E] - mt);
    att[(size_t)k * H * E + h * E + c] = s / lt;
  }
}

#define DECODE_ARGS                                                                                               \
  float *att, const float *qkv, const float *kc, const float *vc, const int *slot, const int *pos, const int *rows, \
      int r, int H, int G, int tmax, float scale

extern "C" __global__ void decode_attention_e16(DECODE_ARGS) {
  decode_attention<16>(att, qkv, kc, vc, slot, pos, rows, r, H, G, tmax, scale);
}
extern "C" __global__ void decode_attention_e32(DECODE_ARGS) {
  decode_attention<32>(att, qkv, kc, vc, slot, pos, rows, r, H, G, tmax, scale);
}
extern "C" __global__ void decode_attention_e64(DECODE_ARGS) {
  decode_attention<64>(att, qkv, kc, vc, slot, pos, rows, r, H, G, tmax, scale);
}
extern "C" __global__ void decode_attention_e128(DECODE_ARGS) {
  decode_attention<128>(att, qkv, kc, vc, slot, pos, rows, r, H, G, tmax, scale);
}
EMU_REGISTER(decode_attention_e16)
EMU_REGISTER(decode_attention_e32)
EMU_REGISTER(decode_attention_e64)
EMU_REGISTER(decode_attention_e128)
