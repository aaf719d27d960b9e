// The lm_head tail, fused: log-softmax at a temperature, entropy and the
// target's log-prob from a block of logits, and their gradient wrt the
// logits, without ever storing a [k, V] probability matrix: the forward
// pass keeps two floats a row (max and log-sum-exp), the backward pass
// recomputes p from the logits and writes the gradient over them. The
// twins of logSoftmaxEntropy and logSoftmaxEntropyBackward
// (gpu/kernels.go), compacted: row i here is row rows[i] there, and the
// per-row arrays (targets, log-probs, entropies, upstream gradients) are
// [k]. One block per row.

// logsoftmax_entropy: with t_v = (z_v − max)·inv (inv = 1/temperature),
//   lse = log Σ_v e^{t_v},  l_v = t_v − lse,
//   logp[i] = l_{targets[i]},  ent[i] = −Σ_v p_v·l_v = lse − Σ_v p_v·t_v.
//   logp, ent, rowmax, rowlse: [k]   logits: [k, v]   targets: [k]
// Launch: grid k, block a multiple of 32 (256).
extern "C" __global__ void logsoftmax_entropy(float* logp, float* ent, float* rowmax, float* rowlse, const float* logits,
                                              const int* targets, int k, int v, float inv) {
  const int i = blockIdx.x;
  if (i >= k) return;
  const float* z = logits + (size_t)i * v;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < v; j += blockDim.x) mx = fmaxf(mx, z[j]);
  mx = block_max(mx);
  float sum = 0, tsum = 0;  // Σ e^t and Σ e^t·t
  for (int j = threadIdx.x; j < v; j += blockDim.x) {
    const float t = (z[j] - mx) * inv, e = expf(t);
    sum += e;
    tsum += e * t;
  }
  sum = block_sum(sum);
  tsum = block_sum(tsum);
  if (threadIdx.x == 0) {
    const float lse = logf(sum);
    rowmax[i] = mx;
    rowlse[i] = lse;
    ent[i] = lse - tsum / sum;
    logp[i] = (z[targets[i]] - mx) * inv - lse;
  }
}
EMU_REGISTER(logsoftmax_entropy)

// logsoftmax_entropy_backward writes the gradient wrt the logits from the
// upstream gradients dlp[i] (of logp[i]) and dH[i] (of ent[i]):
//   dz_v = (dlp·(1[v = target] − p_v) − dH·p_v·(l_v + H))·inv,   p_v = e^{l_v},
// and dlogits16 (unless null) = bf16(dlogits), the bf16 products' operand.
// A row with both gradients 0 gets zeros. dlogits may be logits: each
// element is read, then written, by one thread.
//   dlogits, logits: [k, v]   dlogits16: [k, v] bf16   rowmax, rowlse, ent, targets, dlp, dH: [k]
// Launch: grid k, block 256 (any size).
extern "C" __global__ void logsoftmax_entropy_backward(float* dlogits, bf16* dlogits16, const float* logits,
                                                       const float* rowmax, const float* rowlse, const float* ent,
                                                       const int* targets, const float* dlp, const float* dH, int k,
                                                       int v, float inv) {
  const int i = blockIdx.x;
  if (i >= k) return;
  const float* z = logits + (size_t)i * v;
  float* dz = dlogits + (size_t)i * v;
  bf16* hz = dlogits16 ? dlogits16 + (size_t)i * v : nullptr;
  const float a = dlp[i], b = dH[i], h = ent[i], mx = rowmax[i], lse = rowlse[i];
  const int target = targets[i];
  for (int j = threadIdx.x; j < v; j += blockDim.x) {
    if (a == 0 && b == 0) {
      dz[j] = 0;
    } else {
      const float l = (z[j] - mx) * inv - lse, p = expf(l);
      float g = (-a * p - b * p * (l + h)) * inv;
      if (j == target) g += a * inv;
      dz[j] = g;
    }
    if (hz) hz[j] = f32_to_bf16(dz[j]);
  }
}
EMU_REGISTER(logsoftmax_entropy_backward)
