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

// selftest_halves runs a different warp operation in each half of a warp
// at the same time, each on its own half's mask:
//   lanes 0-15:  out[2t] = __shfl_xor_sync(low, v, 1),   out[2t+1] = __ballot_sync(low, l % 2 == 0)
//   lanes 16-31: out[2t] = __shfl_down_sync(high, v, 2), out[2t+1] = __ballot_sync(high, l % 4 == 0)
// with v as in selftest_warp. Launch: grid 1, block a multiple of 32.
extern "C" __global__ void selftest_halves(int* out) {
  const int t = threadIdx.x, l = t & 31, v = 100 * (t >> 5) + l;
  const unsigned low = 0x0000ffffu, high = 0xffff0000u;
  int* o = out + 2 * t;
  if (l < 16) {
    o[0] = __shfl_xor_sync(low, v, 1);
    o[1] = (int)__ballot_sync(low, l % 2 == 0);
  } else {
    o[0] = __shfl_down_sync(high, v, 2);
    o[1] = (int)__ballot_sync(high, l % 4 == 0);
  }
}
EMU_REGISTER(selftest_halves)

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

// selftest_wmma runs one warp's tensor-core products (wmma.cuh) in each
// layout the API has:
//   out[0, 256):    bf16 A row-major (ld 24) · B column-major (ld 24) + C row-major (ld 16), stored row-major
//   out[256, 512):  bf16 A column-major (ld 24) · B row-major (ld 24) + C column-major, stored column-major
//   out[512, 768):  TF32 A row-major (ld 20) · B row-major (ld 20), two k-steps of 8, + C row-major, stored row-major
//   out[768, 1024): TF32 A column-major (ld 20) · B column-major (ld 20), two k-steps, + C column-major, stored column-major
//   a16, b16: [16·24] bf16   a32, b32: [16·20] (TF32 values)   c: [256]
// Launch: grid 1, block 32.
extern "C" __global__ void selftest_wmma(float* out, const bf16* a16, const bf16* b16, const float* a32, const float* b32,
                                         const float* c) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> ar;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> bc;
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
  wmma::load_matrix_sync(ar, a16, 24);
  wmma::load_matrix_sync(bc, b16, 24);
  wmma::mma_sync(acc, ar, bc, acc);
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> ac;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> br;
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_col_major);
  wmma::load_matrix_sync(ac, a16, 24);
  wmma::load_matrix_sync(br, b16, 24);
  wmma::mma_sync(acc, ac, br, acc);
  wmma::store_matrix_sync(out + 256, acc, 16, wmma::mem_col_major);
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> t;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tar;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tbr;
  wmma::load_matrix_sync(t, c, 16, wmma::mem_row_major);
  for (int k = 0; k < 16; k += 8) {
    wmma::load_matrix_sync(tar, a32 + k, 20);
    wmma::load_matrix_sync(tbr, b32 + k * 20, 20);
    wmma::mma_sync(t, tar, tbr, t);
  }
  wmma::store_matrix_sync(out + 512, t, 16, wmma::mem_row_major);
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> tac;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> tbc;
  wmma::load_matrix_sync(t, c, 16, wmma::mem_col_major);
  for (int k = 0; k < 16; k += 8) {
    wmma::load_matrix_sync(tac, a32 + k * 20, 20);
    wmma::load_matrix_sync(tbc, b32 + k, 20);
    wmma::mma_sync(t, tac, tbc, t);
  }
  wmma::store_matrix_sync(out + 768, t, 16, wmma::mem_col_major);
}
EMU_REGISTER(selftest_wmma)

// selftest_wmma_rowscale scales row r of the 16×16 matrix x by f[r] in an
// accumulator fragment and stores it (row-major, ld 16) to out:
//   guess 0: as a kernel must, through memory: a tile whose row r holds
//            f[r], loaded as a fragment of the same type, multiplied
//            element by element;
//   guess 1: by assuming which row a lane's element is in (the layout
//            sm_80's m16n8k16 accumulators are commonly read with): wrong
//            in the emulator, whose mapping is scrambled, and only right
//            on a GPU whose mapping happens to be the guess.
//   x: [256]   f: [16]   out: [256]
// Launch: grid 1, block 32.
extern "C" __global__ void selftest_wmma_rowscale(float* out, const float* x, const float* f, int guess) {
  __shared__ __align__(32) float rows[256];
  const int lane = threadIdx.x & 31;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, scale;
  wmma::load_matrix_sync(acc, x, 16, wmma::mem_row_major);
  if (guess == 0) {
    for (int e = lane; e < 256; e += 32) rows[e] = f[e / 16];
    __syncwarp();
    wmma::load_matrix_sync(scale, rows, 16, wmma::mem_row_major);
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= scale.x[i];
  } else {
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= f[(lane >> 2) + 8 * ((i >> 1) & 1)];
  }
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}
EMU_REGISTER(selftest_wmma_rowscale)

// selftest_wmma_misuse breaks a rule of wmma.cuh, per how: 0 only lanes
// 0..15 load, 1 lanes load from different matrices, 2 a pointer not
// 256-bit aligned, 3 a leading dimension of 18 floats (not a multiple of
// 16 bytes). Undefined on a GPU, an error in the emulator. Emulator only.
//   x: [512]   out: [256]
// Launch: grid 1, block 32.
extern "C" __global__ void selftest_wmma_misuse(float* out, const float* x, int how) {
  const int lane = threadIdx.x & 31;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  if (how == 0 && lane < 16) wmma::load_matrix_sync(acc, x, 16, wmma::mem_row_major);
  if (how == 1) wmma::load_matrix_sync(acc, x + (lane & 1) * 256, 16, wmma::mem_row_major);
  if (how == 2) wmma::load_matrix_sync(acc, x + 1, 16, wmma::mem_row_major);
  if (how == 3) wmma::load_matrix_sync(acc, x, 18, wmma::mem_row_major);
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}
EMU_REGISTER(selftest_wmma_misuse)
