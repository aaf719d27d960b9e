// Token embedding and its gradient: the twins of embed and embedBackward
// (gpu/kernels.go).

// embed gathers table rows: dst[r] = table[tokens[r]].
//   dst: [n, d]   table: [V, d]   tokens: [n]
// Launch: grid n, block 128 (any size).
extern "C" __global__ void embed(float* dst, const float* table, const int* tokens, int n, int d) {
  const int r = blockIdx.x;
  if (r >= n) return;
  const float* src = table + (size_t)tokens[r] * d;
  float* out = dst + (size_t)r * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) out[j] = src[j];
}
EMU_REGISTER(embed)

// embed_backward adds each row of dy to its token's row of dtable, in row
// order, as the CPU does:
//   dtable[uniq[u]] += dy[rows[offsets[u]]] + dy[rows[offsets[u]+1]] + ...
// rows lists dy's rows grouped by token, ascending within a group
// (kernels.TokenRows builds it on the host from the token ids), so each
// table row is written by one block, in a fixed order: no atomics.
//   dtable: [V, d]   dy: [n, d]   rows: [n]   offsets: [u+1]   uniq: [u]
// Launch: grid u, block 128 (any size).
extern "C" __global__ void embed_backward(float* dtable, const float* dy, const int* rows, const int* offsets,
                                          const int* uniq, int u, int d) {
  const int g = blockIdx.x;
  if (g >= u) return;
  float* out = dtable + (size_t)uniq[g] * d;
  const int lo = offsets[g], hi = offsets[g + 1];
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float acc = out[j];
    for (int i = lo; i < hi; i++) acc += dy[(size_t)rows[i] * d + j];
    out[j] = acc;
  }
}
EMU_REGISTER(embed_backward)
