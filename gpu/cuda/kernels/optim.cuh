// The optimiser's kernels over the flat weight, gradient and moment
// buffers: the gradient norm and clipping (the twin of
// optim.ClipGlobalNorm), AdamW and its preview (optim.AdamW.Step and
// Preview, element by element vec.AdamWElement), and the non-finite check.
// A reduction runs in two passes: a *_partial kernel, grid P blocks (a
// fixed P: kernels.ReduceParts), block 256, block b reducing chunk b of
// the elements (common.cuh's chunk), then a *_finish kernel, one block of
// 256, over the P partial results in a fixed order. Sums are in double, as
// the CPU's.

__device__ __forceinline__ bool finite_f32(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

// sum_squares_partial: part[b] = Σ x[i]² over chunk b.
//   part: [P] double   x: [n]
extern "C" __global__ void sum_squares_partial(double* part, const float* x, long long n) {
  long long lo, hi;
  chunk(n, blockIdx.x, gridDim.x, &lo, &hi);
  double s = 0;
  for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) s += (double)x[i] * (double)x[i];
  s = block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
EMU_REGISTER(sum_squares_partial)

// sum_finish: out[0] = Σ part.
//   out: [1] double   part: [p] double
extern "C" __global__ void sum_finish(double* out, const double* part, int p) {
  double s = 0;
  for (int i = threadIdx.x; i < p; i += blockDim.x) s += part[i];
  s = block_sum(s);
  if (threadIdx.x == 0) out[0] = s;
}
EMU_REGISTER(sum_finish)

// clip_scale scales g by max_norm/(norm + 1e-6) when norm = √sumsq exceeds
// max_norm > 0 and is finite, as torch.nn.utils.clip_grad_norm_ (the scale
// computed in double, applied in float).
//   g: [n]   sumsq: [1] double
// Launch: any grid (kernels.Grid), block 256.
extern "C" __global__ void clip_scale(float* g, long long n, const double* sumsq, double max_norm) {
  const double norm = sqrt(*sumsq);
  if (!(max_norm > 0) || !(norm > max_norm) || isinf(norm)) return;
  const float s = (float)(max_norm / (norm + 1e-6));
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    g[i] *= s;
}
EMU_REGISTER(clip_scale)

// AdamWCoeffs are one step's float32 constants, from the host exactly as
// gpu/optim computes them (vec.AdamWCoeffs).
struct AdamWCoeffs {
  float b1, c1, b2, c2, step, inv_sq_bc2, eps, decay;
};

// adamw_element is vec.AdamWElement: every operation rounded to float32,
// none fused, so the GPU's bits are the CPU's:
//   m' = β1·m + (1−β1)·g,  v' = β2·v + (1−β2)·g·g,
//   w' = w·decay − step·m'/(√v'·inv_sq_bc2 + eps).
__device__ __forceinline__ void adamw_element(float w, float g, float m, float v, const AdamWCoeffs& k, float decay,
                                              float* w2, float* m2, float* v2) {
  *m2 = __fadd_rn(__fmul_rn(k.b1, m), __fmul_rn(k.c1, g));
  *v2 = __fadd_rn(__fmul_rn(k.b2, v), __fmul_rn(__fmul_rn(k.c2, g), g));
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(*v2), k.inv_sq_bc2), k.eps);
  *w2 = __fsub_rn(__fmul_rn(w, decay), __fdiv_rn(__fmul_rn(k.step, *m2), denom));
}

// DecayRanges walks the no-decay ranges ([lo, hi) pairs, ascending) along
// one thread's increasing element indices.
struct DecayRanges {
  const long long* r;
  int n, at;
  // start places the walk at the first range ending after element i.
  __device__ void start(const long long* ranges, int count, long long i) {
    r = ranges;
    n = count;
    int lo = 0, hi = count;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (r[2 * mid + 1] <= i) lo = mid + 1;
      else hi = mid;
    }
    at = lo;
  }
  // decay returns the decay of element i (i never decreasing): 1 in a range.
  __device__ float decay(long long i, float d) {
    while (at < n && r[2 * at + 1] <= i) at++;
    return at < n && r[2 * at] <= i ? 1.0f : d;
  }
};

// adamw takes one AdamW step in place on chunk b of the elements.
//   w, g, m, v: [n]   nodecay: [2·nranges] ascending [lo, hi) element ranges
// Launch: grid P (any), block 256.
extern "C" __global__ void adamw(float* w, const float* g, float* m, float* v, long long n, const long long* nodecay,
                                 int nranges, float b1, float c1, float b2, float c2, float step, float inv_sq_bc2,
                                 float eps, float decay) {
  const AdamWCoeffs k{b1, c1, b2, c2, step, inv_sq_bc2, eps, decay};
  long long lo, hi;
  chunk(n, blockIdx.x, gridDim.x, &lo, &hi);
  DecayRanges ranges;
  ranges.start(nodecay, nranges, lo + threadIdx.x);
  for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x)
    adamw_element(w[i], g[i], m[i], v[i], k, ranges.decay(i, decay), &w[i], &m[i], &v[i]);
}
EMU_REGISTER(adamw)

// adamw_preview_partial computes, for chunk b, what adamw would do without
// doing it: part[3b] = Σ (w' − w)², part[3b+1] = Σ w², part[3b+2] = the
// first element whose w', m' or v' is not finite (or v' < 0), or −1.
//   part: [3P] double   w, g, m, v: [n]   nodecay as adamw
// Launch: grid P, block a multiple of 32 (256).
extern "C" __global__ void adamw_preview_partial(double* part, const float* w, const float* g, const float* m,
                                                 const float* v, long long n, const long long* nodecay, int nranges,
                                                 float b1, float c1, float b2, float c2, float step, float inv_sq_bc2,
                                                 float eps, float decay) {
  const AdamWCoeffs k{b1, c1, b2, c2, step, inv_sq_bc2, eps, decay};
  long long lo, hi;
  chunk(n, blockIdx.x, gridDim.x, &lo, &hi);
  DecayRanges ranges;
  ranges.start(nodecay, nranges, lo + threadIdx.x);
  double delta = 0, norm = 0;
  long long bad = 0x7fffffffffffffffLL;
  for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    float w2, m2, v2;
    adamw_element(w[i], g[i], m[i], v[i], k, ranges.decay(i, decay), &w2, &m2, &v2);
    if (!finite_f32(w2) || !finite_f32(m2) || !finite_f32(v2) || v2 < 0) {
      bad = i;  // this thread's first: its indices increase
      break;
    }
    const double d = (double)w2 - (double)w[i];
    delta += d * d;
    norm += (double)w[i] * (double)w[i];
  }
  delta = block_sum(delta);
  norm = block_sum(norm);
  bad = block_min(bad);
  if (threadIdx.x == 0) {
    part[3 * blockIdx.x] = delta;
    part[3 * blockIdx.x + 1] = norm;
    part[3 * blockIdx.x + 2] = bad == 0x7fffffffffffffffLL ? -1.0 : (double)bad;
  }
}
EMU_REGISTER(adamw_preview_partial)

// adamw_preview_finish: out = {Σ delta, Σ norm, first bad element or −1}
// over the p partial results.
//   out: [3] double   part: [3p] double
// Launch: grid 1, block 256.
extern "C" __global__ void adamw_preview_finish(double* out, const double* part, int p) {
  double delta = 0, norm = 0;
  long long bad = 0x7fffffffffffffffLL;
  for (int i = threadIdx.x; i < p; i += blockDim.x) {
    delta += part[3 * i];
    norm += part[3 * i + 1];
    if (part[3 * i + 2] >= 0) bad = min(bad, (long long)part[3 * i + 2]);
  }
  delta = block_sum(delta);
  norm = block_sum(norm);
  bad = block_min(bad);
  if (threadIdx.x == 0) {
    out[0] = delta;
    out[1] = norm;
    out[2] = bad == 0x7fffffffffffffffLL ? -1.0 : (double)bad;
  }
}
EMU_REGISTER(adamw_preview_finish)

// first_nonfinite_partial: part[b] = the first element of chunk b that is
// NaN or ±Inf, or −1.
//   part: [P] long long   x: [n]
extern "C" __global__ void first_nonfinite_partial(long long* part, const float* x, long long n) {
  long long lo, hi;
  chunk(n, blockIdx.x, gridDim.x, &lo, &hi);
  long long bad = 0x7fffffffffffffffLL;
  for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x)
    if (!finite_f32(x[i])) {
      bad = i;
      break;
    }
  bad = block_min(bad);
  if (threadIdx.x == 0) part[blockIdx.x] = bad == 0x7fffffffffffffffLL ? -1 : bad;
}
EMU_REGISTER(first_nonfinite_partial)

// first_finish: out[0] = the smallest non-negative part, or −1.
//   out: [1] long long   part: [p] long long
// Launch: grid 1, block 256.
extern "C" __global__ void first_finish(long long* out, const long long* part, int p) {
  long long bad = 0x7fffffffffffffffLL;
  for (int i = threadIdx.x; i < p; i += blockDim.x)
    if (part[i] >= 0) bad = min(bad, part[i]);
  bad = block_min(bad);
  if (threadIdx.x == 0) out[0] = bad == 0x7fffffffffffffffLL ? -1 : bad;
}
EMU_REGISTER(first_finish)
