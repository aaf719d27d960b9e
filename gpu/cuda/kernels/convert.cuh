// Element-wise and row moves: bf16 conversion for the bf16 products, the
// residual add, and the row gather/scatter of the last block (the twins of
// gatherRows and scatterRows in gpu/model.go). All grid-stride over their
// elements: any grid (kernels.Grid picks one), block 256.

// f32_to_bf16_kernel rounds src to bf16, to nearest even.
//   dst: [n] bf16   src: [n]
extern "C" __global__ void f32_to_bf16_kernel(bf16* dst, const float* src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = f32_to_bf16(src[i]);
}
EMU_REGISTER(f32_to_bf16_kernel)

// bf16_to_f32_kernel widens src (exact).
//   dst: [n]   src: [n] bf16
extern "C" __global__ void bf16_to_f32_kernel(float* dst, const bf16* src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = bf16_to_f32(src[i]);
}
EMU_REGISTER(bf16_to_f32_kernel)

// add_inplace: y += x.
//   y, x: [n]
extern "C" __global__ void add_inplace(float* y, const float* x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] += x[i];
}
EMU_REGISTER(add_inplace)

// gather_rows copies rows rows of src to the first k rows of dst:
// dst[i] = src[rows[i]].
//   dst: [k, d]   src: [*, d]   rows: [k]
extern "C" __global__ void gather_rows(float* dst, const float* src, const int* rows, int k, int d) {
  const long long total = (long long)k * d;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / d, j = i - r * d;
    dst[i] = src[(long long)rows[r] * d + j];
  }
}
EMU_REGISTER(gather_rows)

// scatter_rows is gather_rows' inverse: dst[rows[i]] = src[i] for i < k.
// The other rows of dst are left alone (clear dst first, as the CPU's
// in-place scatterRows zeroes them). dst and src must not overlap.
//   dst: [n, d]   src: [k, d]   rows: [k], distinct
extern "C" __global__ void scatter_rows(float* dst, const float* src, const int* rows, int k, int d) {
  const long long total = (long long)k * d;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / d, j = i - r * d;
    dst[(long long)rows[r] * d + j] = src[i];
  }
}
EMU_REGISTER(scatter_rows)
