// RMSNorm and its gradients: the twins of rmsnorm and rmsnormBackward
// (gpu/kernels.go). One block per row; the weight gradient is a column sum
// over rows done in two deterministic passes (rmsnorm_weight_partial over
// chunks of rows, column_sum_add over the chunks, in order). The output of
// rmsnorm and the input gradient of rmsnorm_backward are bf16 products'
// operands: with bf16 products each also writes its bf16 copy (f32_to_bf16
// of the float it stores, the bits f32_to_bf16_kernel would give).

// rmsnorm: y[r] = x[r]·inv[r]·w with inv[r] = 1/√(mean(x[r]²) + eps), kept
// for the backward pass; y16 (unless null) = bf16(y).
//   y, x: [n, d]   y16: [n, d] bf16   inv: [n]   w: [d]
// Launch: grid n, block a multiple of 32 (128).
extern "C" __global__ void rmsnorm(float* y, bf16* y16, float* inv, const float* x, const float* w, int n, int d,
                                   float eps) {
  const int r = blockIdx.x;
  if (r >= n) return;
  const float* xr = x + (size_t)r * d;
  float* yr = y + (size_t)r * d;
  bf16* hr = y16 ? y16 + (size_t)r * d : nullptr;
  float ss = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x) ss += xr[j] * xr[j];
  ss = block_sum(ss);
  const float s = (float)(1.0 / sqrt((double)ss / d + (double)eps));  // as the CPU: in float64
  if (threadIdx.x == 0) inv[r] = s;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    yr[j] = xr[j] * s * w[j];
    if (hr) hr[j] = f32_to_bf16(yr[j]);
  }
}
EMU_REGISTER(rmsnorm)

// rmsnorm_backward accumulates the input gradient: with g = dy[r] ⊙ w and
// s = inv[r],
//   dx[r] += s·g − c·x[r],   c = s³·(g·x[r])/d,
// and dx16 (unless null) = bf16(dx), the sum.
//   dx, dy, x: [n, d]   dx16: [n, d] bf16   inv: [n]   w: [d]
// Launch: grid n, block a multiple of 32 (128).
extern "C" __global__ void rmsnorm_backward(float* dx, bf16* dx16, const float* dy, const float* x, const float* inv,
                                            const float* w, int n, int d) {
  const int r = blockIdx.x;
  if (r >= n) return;
  const float* xr = x + (size_t)r * d;
  const float* gr = dy + (size_t)r * d;
  float* dr = dx + (size_t)r * d;
  bf16* hr = dx16 ? dx16 + (size_t)r * d : nullptr;
  float dot = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x) dot += gr[j] * w[j] * xr[j];
  dot = block_sum(dot);
  const float s = inv[r], c = s * s * s * dot / d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    dr[j] += s * gr[j] * w[j] - c * xr[j];
    if (hr) hr[j] = f32_to_bf16(dr[j]);
  }
}
EMU_REGISTER(rmsnorm_backward)

// rmsnorm_weight_partial sums the weight gradient over one chunk of rows:
//   part[c, j] = Σ_{r in chunk c} dy[r, j]·x[r, j]·inv[r],
// chunk c = rows [c·rows_per, (c+1)·rows_per), each column's rows in order.
//   part: [chunks, d]   dy, x: [n, d]   inv: [n]
// Launch: grid (ceil(d/128), chunks), block 128.
extern "C" __global__ void rmsnorm_weight_partial(float* part, const float* dy, const float* x, const float* inv, int n,
                                                  int d, int rows_per) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (j >= d) return;
  const int lo = c * rows_per, hi = min(n, lo + rows_per);
  float acc = 0;
  for (int r = lo; r < hi; r++) acc += dy[(size_t)r * d + j] * x[(size_t)r * d + j] * inv[r];
  part[(size_t)c * d + j] = acc;
}
EMU_REGISTER(rmsnorm_weight_partial)

// column_sum_add adds the column sums of part to dst, rows in order:
//   dst[j] += part[0, j] + part[1, j] + ... + part[rows−1, j].
//   dst: [d]   part: [rows, d]
// Launch: grid ceil(d/128), block 128.
extern "C" __global__ void column_sum_add(float* dst, const float* part, int rows, int d) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  float acc = 0;
  for (int r = 0; r < rows; r++) acc += part[(size_t)r * d + j];
  dst[j] += acc;
}
EMU_REGISTER(column_sum_add)
