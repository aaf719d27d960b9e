// The attention inputs of the other decoder families, between the q/k/v
// product and RoPE: the twins of gpu/qkv.go. Qwen2 adds one bias vector to
// every row of the product; Qwen3 RMSNorms each query head and each key
// head. A row of qkv holds H query heads, then G key heads, then G value
// heads, each of width e: stride (H+2G)·e. Every gradient summed over rows
// is two passes (a partial per chunk of rows, then column_sum_add over the
// chunks in order): no atomics, the same bits every run.

// add_bias_rows adds b to every row of y: y[r, j] += b[j].
//   y: [n, d]   b: [d]
// CPU twin: projectQKV (whose rows start as the bias). Launch: grid-stride.
extern "C" __global__ void add_bias_rows(float* y, const float* b, int n, int d) {
  const long long total = (long long)n * d;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    y[i] += b[i % d];
  }
}
EMU_REGISTER(add_bias_rows)

// column_sum_partial sums one chunk of rows of x per column:
//   part[c, j] = Σ_{r in chunk c} x[r, j],
// chunk c = rows [c·rows_per, (c+1)·rows_per), each column's rows in order.
//   part: [chunks, d]   x: [n, d]
// CPU twin: biasBackward (with column_sum_add). Launch: grid (ceil(d/128),
// chunks), block 128.
extern "C" __global__ void column_sum_partial(float* part, const float* x, int n, int d, int rows_per) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (j >= d) return;
  const int lo = c * rows_per, hi = min(n, lo + rows_per);
  float acc = 0;
  for (int r = lo; r < hi; r++) acc += x[(size_t)r * d + j];
  part[(size_t)c * d + j] = acc;
}
EMU_REGISTER(column_sum_partial)

// QK_WARPS is the warps of a qk_norm block: each warp owns one head of one
// row (pair p = row·(H+G) + head), its lanes the head's columns.
#define QK_WARPS 4

// qk_norm RMSNorms, in place, each of the H query heads (weight wq) and G
// key heads (weight wk) of the n rows of qkv: head ← head·s·w with
// s = 1/√(mean(head²) + eps), kept in inv. With raw not null it first keeps
// the heads as they were, for qk_norm_backward. The value heads are left
// alone.
//   qkv: [n, (H+2G)·e]   raw: [n, (H+G)·e]   inv: [n, H+G]   wq, wk: [e]
// CPU twin: qkNorm. Launch: grid ceil(n·(H+G)/4), block 128.
extern "C" __global__ void qk_norm(float* qkv, float* raw, float* inv, const float* wq, const float* wk, int n, int H,
                                   int G, int e, float eps) {
  const int heads = H + G, lane = threadIdx.x & 31;
  const long long p = (long long)blockIdx.x * QK_WARPS + (threadIdx.x >> 5);
  if (p >= (long long)n * heads) return;  // the whole warp: no barrier follows but the warp's own
  const long long r = p / heads;
  const int h = (int)(p - r * heads);
  float* x = qkv + r * (H + 2 * G) * e + (long long)h * e;
  float* keep = raw ? raw + p * e : nullptr;
  const float* w = h < H ? wq : wk;
  float ss = 0;
  for (int j = lane; j < e; j += 32) {
    const float v = x[j];
    ss += v * v;
    if (keep) keep[j] = v;
  }
  ss = warp_sum(ss);
  const float s = (float)(1.0 / sqrt((double)ss / e + (double)eps));  // as the CPU: in float64
  if (lane == 0) inv[p] = s;
  for (int j = lane; j < e; j += 32) x[j] = x[j] * s * w[j];
}
EMU_REGISTER(qk_norm)

// qk_norm_backward turns, in place, the gradient wrt each normed query and
// key head of dqkv into the gradient wrt the head before the norm: with
// g = dy ⊙ w and s the head's 1/rms,
//   dx = s·g − c·x,   c = s³·(g·x)/e.
// Run qk_norm_weight_partial first: it reads dy.
//   dqkv: [n, (H+2G)·e]   raw: [n, (H+G)·e]   inv: [n, H+G]   wq, wk: [e]
// CPU twin: qkNormBackward (dx). Launch: grid ceil(n·(H+G)/4), block 128.
extern "C" __global__ void qk_norm_backward(float* dqkv, const float* raw, const float* inv, const float* wq,
                                            const float* wk, int n, int H, int G, int e) {
  const int heads = H + G, lane = threadIdx.x & 31;
  const long long p = (long long)blockIdx.x * QK_WARPS + (threadIdx.x >> 5);
  if (p >= (long long)n * heads) return;
  const long long r = p / heads;
  const int h = (int)(p - r * heads);
  float* dy = dqkv + r * (H + 2 * G) * e + (long long)h * e;
  const float* x = raw + p * e;
  const float* w = h < H ? wq : wk;
  float dot = 0;
  for (int j = lane; j < e; j += 32) dot += dy[j] * w[j] * x[j];
  dot = warp_sum(dot);
  const float s = inv[p], c = s * s * s * dot / e;
  for (int j = lane; j < e; j += 32) dy[j] = s * dy[j] * w[j] - c * x[j];
}
EMU_REGISTER(qk_norm_backward)

// qk_norm_weight_partial sums the norm weights' gradient over one chunk of
// rows and over the heads: column j < e is q_norm's (query heads), column
// e + j k_norm's (key heads),
//   part[c, j]     = Σ_{r in chunk c} Σ_{h < H}      dy[r, h, j]·x[r, h, j]·inv[r, h],
//   part[c, e + j] = Σ_{r in chunk c} Σ_{H ≤ h < H+G} dy[r, h, j]·x[r, h, j]·inv[r, h],
// rows in order, each row's heads in order.
//   part: [chunks, 2e]   dqkv: [n, (H+2G)·e]   raw: [n, (H+G)·e]   inv: [n, H+G]
// CPU twin: qkNormBackward (dwq, dwk; with column_sum_add). Launch: grid
// (ceil(2e/128), chunks), block 128.
extern "C" __global__ void qk_norm_weight_partial(float* part, const float* dqkv, const float* raw, const float* inv, int n,
                                                  int H, int G, int e, int rows_per) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (j >= 2 * e) return;
  const int heads = H + G, col = j % e, h0 = j < e ? 0 : H, h1 = j < e ? H : heads;
  const int lo = c * rows_per, hi = min(n, lo + rows_per);
  float acc = 0;
  for (int r = lo; r < hi; r++) {
    const float* dy = dqkv + (size_t)r * (H + 2 * G) * e;
    const float* x = raw + (size_t)r * heads * e;
    for (int h = h0; h < h1; h++) acc += dy[h * e + col] * x[h * e + col] * inv[(size_t)r * heads + h];
  }
  part[(size_t)c * 2 * e + j] = acc;
}
EMU_REGISTER(qk_norm_weight_partial)
