//go:build cudaemu

// emu_api.h: the C interface of the emulated kernels (emu_runtime.cc), for
// emu.go.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// emu_launch runs kernel name over grid × block with shared bytes of
// dynamic shared memory; args holds one 8-byte slot per argument and kinds
// their cuda.ArgKind letters (NUL-terminated). It returns 0, or 1 with a
// message in err.
int emu_launch(const char* name, const unsigned grid[3], const unsigned block[3], size_t shared,
               const uint64_t* args, const char* kinds, char* err, size_t errlen);

// The registered kernels, by index in name order.
int emu_kernel_count(void);
const char* emu_kernel_name(int i);
const char* emu_kernel_kinds(int i);

#ifdef __cplusplus
}
#endif
