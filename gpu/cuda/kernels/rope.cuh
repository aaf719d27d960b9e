// Rotary position embedding: the twin of rope (gpu/kernels.go), Hugging
// Face's rotate_half convention from a cos/sin table.

// rope rotates, in place, the first heads·e columns of each row of x by the
// row's position: per head, with halves x1 = v[0:e/2], x2 = v[e/2:e],
//   v' = [x1·cos − sign·x2·sin, x2·cos + sign·x1·sin].
// sign 1 is the rotation; −1 its inverse, the backward pass (the rotation
// is orthogonal).
//   x: [n, stride]   pos: [n]   cos_t, sin_t: [context, e/2]
// Launch: grid n, block 128 (any size).
extern "C" __global__ void rope(float* x, const int* pos, const float* cos_t, const float* sin_t, int n, int stride,
                                int heads, int e, float sign) {
  const int r = blockIdx.x;
  if (r >= n) return;
  const int half = e / 2;
  const float* c = cos_t + (size_t)pos[r] * half;
  const float* s = sin_t + (size_t)pos[r] * half;
  float* row = x + (size_t)r * stride;
  for (int i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int h = i / half, k = i - h * half;
    float* v = row + h * e;
    const float x1 = v[k], x2 = v[k + half];
    v[k] = x1 * c[k] - sign * x2 * s[k];
    v[k + half] = x2 * c[k] + sign * x1 * s[k];
  }
}
EMU_REGISTER(rope)
