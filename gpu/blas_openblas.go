//go:build openblas

package gpu

// Build with
//
//	CGO_LDFLAGS="-L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas" go build -tags openblas
//
// to route every matrix product through OpenBLAS (cgo).

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <strings.h>

void openblas_set_num_threads(int);
char* openblas_get_corename(void);

// mgrpo_openblas_setup runs OpenBLAS single-threaded and, when a
// DYNAMIC_ARCH build did not recognise the CPU (OpenBLAS 0.3.21 reports
// newer Xeons under a hypervisor as "Prescott", its plain-SSE3 fallback, at
// a third of the speed), re-selects the kernels for the instruction set the
// CPU does have. An explicit OPENBLAS_CORETYPE is left alone.
static const char* mgrpo_openblas_setup(void) {
	openblas_set_num_threads(1);
	if (getenv("OPENBLAS_CORETYPE") != NULL || strcasecmp(openblas_get_corename(), "prescott") != 0) {
		return openblas_get_corename();
	}
	void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
	void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
	const char* want = NULL;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
		want = "SkylakeX";
	} else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		want = "Haswell";
	}
	if (want != NULL && quit != NULL && init != NULL) {
		setenv("OPENBLAS_CORETYPE", want, 1);
		quit();
		init();
		unsetenv("OPENBLAS_CORETYPE");
	}
	return openblas_get_corename();
}
*/
import "C"

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"

	"github.com/mgrpo/mgrpo/gpu/internal/panel"
	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// BLASName names the BLAS implementation this binary was built with.
const BLASName = "OpenBLAS"

var (
	blas32Impl blas.Float32 = netlib.Implementation{}
	blas64Impl blas.Float64 = netlib.Implementation{}
)

// blasCore is the OpenBLAS kernel set in use (e.g. "SkylakeX"), chosen once
// at start-up. OpenBLAS runs single-threaded: the model runs one shard of
// a batch per core (shard.go), each calling BLAS on its own goroutine, and
// OpenBLAS's own worker threads would otherwise spin between calls and
// take the cores from Go's element-wise work (go-deps §10). On AMD EPYC
// (Zen 4) OpenBLAS 0.3.21 picks its Cooperlake (AVX-512) kernels; the
// SkylakeX and Haswell sets measured the same on the model's shapes, its
// Zen set about 5% slower (docs/BENCHMARKS.md).
var blasCore = C.GoString(C.mgrpo_openblas_setup())

// BLASKernels is the OpenBLAS kernel set in use ("SkylakeX"): the one a
// comparison on this machine should give another program's OpenBLAS too.
func BLASKernels() string { return blasCore }

// BLASInfo describes the BLAS in use, with OpenBLAS's kernel set, the
// kernel of the packed weight products (packed.go) and the vector kernels
// of the element-wise work.
func BLASInfo() string {
	return BLASName + " (" + blasCore + " kernels, 1 thread per goroutine); packed weight products " +
		panel.Info() + "; vector kernels " + vec.Info()
}
