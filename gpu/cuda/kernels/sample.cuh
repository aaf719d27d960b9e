// Drawing the next token of each decoding row: the twin of drawToken and
// the drawer (gpu/sample.go), with its semantics: temperature; top-k
// keeping the tokens tied with the k-th; top-p over the top-k set,
// renormalised, the crossing token included (ties at the crossing taken in
// id order); greedy takes the most likely token, the lowest id on ties;
// EOS and the length limit end a row. The reported log-prob and entropy
// are over the full vocabulary at the temperature, whatever the filters.
//
// The random numbers are counter-based: the draw of a row depends only on
// (its prompt's seed, its completion index, its token index), never on the
// batch. The CPU draws from a PCG stream per completion instead: the two
// draw from the same distribution, not the same tokens.
//
// The candidate set is found without sorting: top-k and top-p are
// thresholds on the logits' order, found by binary search over their
// ordered bit patterns (each step a block reduction over the row), and the
// draw walks the candidates in id order through a prefix sum over the
// threads' contiguous chunks, both in a fixed order. One block per row.

// mix64 is SplitMix64's finaliser: a bijection of 64 bits that scrambles
// every input bit into every output bit.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// draw_uniform is the uniform [0, 1) number of token t of completion j of
// the prompt with seed seed (53 random bits, as Go's Float64).
__device__ __forceinline__ double draw_uniform(unsigned long long seed, int j, int t) {
  const unsigned long long u = mix64(mix64(mix64(seed) ^ (unsigned long long)(unsigned)j) ^ (unsigned long long)(unsigned)t);
  return (double)(u >> 11) * (1.0 / 9007199254740992.0);
}

// order_key maps a float to an unsigned int in the same order (larger
// float, larger key; −0 below +0).
__device__ __forceinline__ unsigned order_key(float x) {
  const unsigned u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct WarpMaxU64 {
  __device__ unsigned long long operator()(unsigned long long v) const { return warp_max(v); }
};

// Row is one logits row at the temperature: e(j) = e^{(z_j − max)·inv}.
struct Row {
  const float* z;
  int v;
  float mx, inv;
  __device__ float e(int j) const { return expf((z[j] - mx) * inv); }
};

// mass_above returns Σ e(j) (or the count, when count) over the tokens
// with order_key(z_j) ≥ x, the same in every thread.
__device__ __forceinline__ float mass_above(const Row& row, unsigned x, bool count) {
  float s = 0;
  for (int j = threadIdx.x; j < row.v; j += blockDim.x)
    if (order_key(row.z[j]) >= x) s += count ? 1.0f : row.e(j);
  return block_sum(s);
}

// threshold returns the largest key x ≥ lo with mass_above(x) ≥ target
// (target ≤ mass_above(lo)): the key of the token where the sorted
// cumulative count or mass reaches target.
__device__ __forceinline__ unsigned threshold(const Row& row, unsigned lo, float target, bool count) {
  unsigned hi = 0xffffffffu;
  while (lo < hi) {
    const unsigned mid = lo + (unsigned)(((unsigned long long)hi - lo + 1) / 2);
    if (mass_above(row, mid, count) >= target) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Candidates are the tokens j with key > x, or key == x and j ≤ last.
struct Candidates {
  unsigned x;
  int last;
  __device__ bool has(const Row& row, int j) const {
    const unsigned k = order_key(row.z[j]);
    return k > x || (k == x && j <= last);
  }
};

// scan_to returns the first token, in id order, at which the running sum
// of w(j) over the tokens with in(j) exceeds target, or −1 if none does;
// the threads own contiguous chunks and their sums are scanned in thread
// order, so one thread's chunk holds the crossing (if rounding keeps its
// own running sum from exceeding target, its last token with weight).
template <class In, class W>
__device__ __forceinline__ int scan_to(const Row& row, float target, In in, W w) {
  __shared__ float sums[1024];
  __shared__ int found;
  const int t = threadIdx.x, per = (row.v + blockDim.x - 1) / blockDim.x;
  const int lo = min(row.v, t * per), hi = min(row.v, lo + per);
  float s = 0;
  for (int j = lo; j < hi; j++)
    if (in(j)) s += w(j);
  __syncthreads();  // sums and found may still be read by a previous call
  sums[t] = s;
  if (t == 0) found = -1;
  __syncthreads();
  float before = 0;  // the exclusive prefix, summed in thread order (the same bits in every thread)
  for (int u = 0; u < t; u++) before += sums[u];
  if (before <= target && before + s > target) {
    int last = -1;
    for (int j = lo; j < hi; j++) {
      if (!in(j) || !(w(j) > 0)) continue;
      last = j;
      before += w(j);
      if (before > target) break;
    }
    found = last;
  }
  __syncthreads();
  return found;
}

// sample_tokens draws row i's token into tokens[i] with its log-prob and
// entropy, counts it (count[i]++: the completion's tokens so far) and sets
// finish[i]: 1 if it is eos (eos > 0), 2 if the completion reached
// limit[i] tokens, else 0. The row's random number is keyed by (seeds[i],
// completion[i], count[i] before the draw).
//   tokens, finish, count, completion, limit: [r] int   logp, entropy: [r]
//   logits: [r, v]   seeds: [r] unsigned long long
// Launch: grid r, block a multiple of 32, at most 1024 (256).
extern "C" __global__ void sample_tokens(int* tokens, float* logp, float* entropy, int* finish, int* count,
                                         const float* logits, const unsigned long long* seeds, const int* completion,
                                         const int* limit, int r, int v, float inv, int top_k, float top_p, int greedy,
                                         int eos) {
  const int i = blockIdx.x;
  if (i >= r) return;
  Row row{logits + (size_t)i * v, v, 0, inv};
  // the most likely token, lowest id on ties: max of (key, ~id)
  __shared__ unsigned long long best_part[32];
  unsigned long long best = 0;
  for (int j = threadIdx.x; j < v; j += blockDim.x)
    best = max(best, (unsigned long long)order_key(row.z[j]) << 32 | (0xffffffffu - (unsigned)j));
  best = block_reduce(best, 0ULL, best_part, WarpMaxU64());
  const int top = (int)(0xffffffffu - (unsigned)best);
  row.mx = row.z[top];
  float sum = 0, tsum = 0;
  for (int j = threadIdx.x; j < v; j += blockDim.x) {
    const float t = (row.z[j] - row.mx) * inv, e = expf(t);
    sum += e;
    tsum += e * t;
  }
  sum = block_sum(sum);
  tsum = block_sum(tsum);
  const float lse = logf(sum);
  int tok = top;
  if (!greedy) {
    Candidates cand{0, v};  // everything
    if (top_k > 0 && top_k < v) cand.x = threshold(row, 0, (float)top_k, true);
    if (top_p > 0 && top_p < 1) {
      const float total = cand.x ? mass_above(row, cand.x, false) : sum;
      cand.x = threshold(row, cand.x, top_p * total, false);
      const float above = cand.x == 0xffffffffu ? 0 : mass_above(row, cand.x + 1, false);
      const unsigned x = cand.x;
      cand.last = scan_to(row, top_p * total - above, [&](int j) { return order_key(row.z[j]) == x; },
                          [&](int j) { return row.e(j); });
      if (cand.last < 0) cand.last = v;  // rounding: the whole tie
    }
    float mass = 0;
    for (int j = threadIdx.x; j < v; j += blockDim.x)
      if (cand.has(row, j)) mass += row.e(j);
    mass = block_sum(mass);
    const float target = (float)(draw_uniform(seeds[i], completion[i], count[i]) * mass);
    tok = scan_to(row, target, [&](int j) { return cand.has(row, j); }, [&](int j) { return row.e(j); });
    if (tok < 0) {  // rounding put the target past the end: the last candidate that can be drawn
      __shared__ long long last_part[32];
      long long last = -1;
      for (int j = threadIdx.x; j < v; j += blockDim.x)
        if (cand.has(row, j) && row.e(j) > 0) last = j;
      tok = (int)block_reduce(last, -1LL, last_part, WarpMax());
    }
  }
  if (threadIdx.x == 0) {
    tokens[i] = tok;
    logp[i] = (row.z[tok] - row.mx) * inv - lse;
    entropy[i] = lse - tsum / sum;
    const int n = ++count[i];
    finish[i] = eos > 0 && tok == eos ? 1 : n >= limit[i] ? 2 : 0;
  }
}
EMU_REGISTER(sample_tokens)
