// mgrpo.cu: every kernel of the CUDA engine, one translation unit. NVRTC
// compiles it with the other files as named headers (kernels.Program); the
// emulator compiles it as C++ after emu.h (emu_kernels.cc). Each included
// file holds the kernels of one CPU kernel family, with their shapes.
#include "common.cuh"
#include "wmma.cuh"

#include "convert.cuh"
#include "embed.cuh"
#include "norm.cuh"
#include "qkv.cuh"
#include "rope.cuh"
#include "swiglu.cuh"
#include "lmhead.cuh"
#include "optim.cuh"
#include "attention.cuh"
#include "attention_tc.cuh"
#include "decode.cuh"
#include "sample.cuh"
#include "selftest.cuh"
