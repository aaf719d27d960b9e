// SwiGLU: the twins of swiglu and swigluBackward (gpu/kernels.go).
// Grid-stride over the n·m outputs: any grid (kernels.Grid), block 256.

// swiglu: act[r, j] = silu(g)·u = g·σ(g)·u with g = gu[r, j], u = gu[r, m+j],
// keeping σ(g) in sig for the backward pass (sig may be null: scoring).
//   act, sig: [n, m]   gu: [n, 2m] (gate columns, then up)
extern "C" __global__ void swiglu(float* act, float* sig, const float* gu, int n, int m) {
  const long long total = (long long)n * m;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / m, j = i - r * m;
    const float g = gu[r * 2 * m + j], u = gu[r * 2 * m + m + j];
    const float s = 1.0f / (1.0f + expf(-g));
    if (sig) sig[i] = s;
    act[i] = g * s * u;
  }
}
EMU_REGISTER(swiglu)

// swiglu_backward writes the gradient wrt gu, with σ = sig:
//   dgate = dy·u·σ·(1 + g·(1−σ)),   dup = dy·g·σ.
//   dgu, gu: [n, 2m]   dact, sig: [n, m]
extern "C" __global__ void swiglu_backward(float* dgu, const float* dact, const float* gu, const float* sig, int n, int m) {
  const long long total = (long long)n * m;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / m, j = i - r * m;
    const float g = gu[r * 2 * m + j], u = gu[r * 2 * m + m + j], s = sig[i], dy = dact[i];
    dgu[r * 2 * m + j] = dy * u * s * (1 + g * (1 - s));
    dgu[r * 2 * m + m + j] = dy * g * s;
  }
}
EMU_REGISTER(swiglu_backward)
