// SwiGLU: the twins of swiglu and swigluBackward (gpu/kernels.go).
// Grid-stride over the n·m outputs: any grid (kernels.Grid), block 256.
// act and dgu are bf16 products' operands: with bf16 products each kernel
// also writes its output's bf16 copy (f32_to_bf16 of the float it stores,
// the bits f32_to_bf16_kernel would give).

// swiglu: act[r, j] = silu(g)·u = g·σ(g)·u with g = gu[r, j], u = gu[r, m+j],
// keeping σ(g) in sig for the backward pass (sig may be null: scoring);
// act16 (unless null) = bf16(act).
//   act, sig: [n, m]   act16: [n, m] bf16   gu: [n, 2m] (gate columns, then up)
extern "C" __global__ void swiglu(float* act, bf16* act16, float* sig, const float* gu, int n, int m) {
  const long long total = (long long)n * m;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / m, j = i - r * m;
    const float g = gu[r * 2 * m + j], u = gu[r * 2 * m + m + j];
    const float s = 1.0f / (1.0f + expf(-g));
    if (sig) sig[i] = s;
    act[i] = g * s * u;
    if (act16) act16[i] = f32_to_bf16(act[i]);
  }
}
EMU_REGISTER(swiglu)

// swiglu_backward writes the gradient wrt gu, with σ = sig:
//   dgate = dy·u·σ·(1 + g·(1−σ)),   dup = dy·g·σ,
// and dgu16 (unless null) = bf16(dgu).
//   dgu, gu: [n, 2m]   dgu16: [n, 2m] bf16   dact, sig: [n, m]
extern "C" __global__ void swiglu_backward(float* dgu, bf16* dgu16, const float* dact, const float* gu, const float* sig,
                                           int n, int m) {
  const long long total = (long long)n * m;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / m, j = i - r * m, gate = r * 2 * m + j, up = gate + m;
    const float g = gu[gate], u = gu[up], s = sig[i], dy = dact[i];
    dgu[gate] = dy * u * s * (1 + g * (1 - s));
    dgu[up] = dy * g * s;
    if (dgu16) {
      dgu16[gate] = f32_to_bf16(dgu[gate]);
      dgu16[up] = f32_to_bf16(dgu[up]);
    }
  }
}
EMU_REGISTER(swiglu_backward)
