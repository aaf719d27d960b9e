// Kernels that test the emulator's model of CUDA (gpu/cuda/emu's tests run
// them there, and the same tests on a GPU check that the model matches).

// selftest_block_sum writes Σ x to out[0] and max x to out[1] with the
// shared block reductions.
//   out: [2]   x: [n]
// Launch: grid 1, block a multiple of 32.
extern "C" __global__ void selftest_block_sum(float* out, const float* x, int n) {
  float s = 0, m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    s += x[i];
    m = fmaxf(m, x[i]);
  }
  s = block_sum(s);
  m = block_max(m);
  if (threadIdx.x == 0) {
    out[0] = s;
    out[1] = m;
  }
}
EMU_REGISTER(selftest_block_sum)

// selftest_warp writes, for every thread t of a block of whole warps, what
// each warp operation gives lane l = t % 32 when lane l offers 100·warp + l:
//   out[8t+0] __shfl_sync from lane (7l+3) % 32     out[8t+1] __shfl_xor_sync 5
//   out[8t+2] __shfl_down_sync 3                      out[8t+3] __shfl_up_sync 3
//   out[8t+4] __shfl_xor_sync 6, width 8              out[8t+5] __shfl_down_sync 2, width 8
//   out[8t+6] __ballot_sync(l % 3 == 0)               out[8t+7] __any_sync(l == 31) + 2·__all_sync(l < 40)
// Launch: grid 1, block a multiple of 32.
extern "C" __global__ void selftest_warp(int* out) {
  const int t = threadIdx.x, l = t & 31, v = 100 * (t >> 5) + l;
  int* o = out + 8 * t;
  o[0] = __shfl_sync(FULL_MASK, v, (7 * l + 3) % 32);
  o[1] = __shfl_xor_sync(FULL_MASK, v, 5);
  o[2] = __shfl_down_sync(FULL_MASK, v, 3);
  o[3] = __shfl_up_sync(FULL_MASK, v, 3);
  o[4] = __shfl_xor_sync(FULL_MASK, v, 6, 8);
  o[5] = __shfl_down_sync(FULL_MASK, v, 2, 8);
  o[6] = (int)__ballot_sync(FULL_MASK, l % 3 == 0);
  o[7] = __any_sync(FULL_MASK, l == 31) + 2 * __all_sync(FULL_MASK, l < 40);
}
EMU_REGISTER(selftest_warp)

// selftest_reverse reverses x through dynamic shared memory: out[i] =
// x[n−1−i].
//   out, x: [n], n = blockDim.x; dynamic shared: 4n bytes
// Launch: grid 1, block n.
extern "C" __global__ void selftest_reverse(float* out, const float* x) {
  DYNAMIC_SHARED(float, s);
  const int i = threadIdx.x, n = blockDim.x;
  s[i] = x[i];
  __syncthreads();
  out[i] = s[n - 1 - i];
}
EMU_REGISTER(selftest_reverse)

// selftest_mismatch lets the first half of a block return while the other
// half waits in __syncthreads: undefined on a GPU (it may hang), an error
// in the emulator. Emulator only.
extern "C" __global__ void selftest_mismatch(int* out) {
  if (threadIdx.x < blockDim.x / 2) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
EMU_REGISTER(selftest_mismatch)

// selftest_uninitialised copies a __shared__ array nobody wrote: NaNs in the
// emulator, whatever was there on a GPU. Emulator only.
//   out: [32]
extern "C" __global__ void selftest_uninitialised(float* out) {
  __shared__ float never[32];
  out[threadIdx.x & 31] = never[threadIdx.x & 31];
}
EMU_REGISTER(selftest_uninitialised)
