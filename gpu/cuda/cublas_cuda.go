//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcublas -lcuda
#include <stdint.h>
#include <cuda.h>
#include <cublas_v2.h>

// mgrpo_gemm is one column-major cublasGemmEx, or a strided batch of them.
// math: 0 fp32, 1 TF32, 2 bf16 inputs (see Math).
static cublasStatus_t mgrpo_gemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
    uintptr_t pa, int lda, long long sa, uintptr_t pb, int ldb, long long sb, float beta,
    uintptr_t pc, int ldc, long long sc, int batch, int math, int cbf16) {
  const void *a = (const void*)pa, *b = (const void*)pb;
  void* c = (void*)pc;
  cudaDataType_t ab = math == 2 ? CUDA_R_16BF : CUDA_R_32F;
  cudaDataType_t ct = cbf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasComputeType_t comp = math == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch <= 1)
    return cublasGemmEx(h, oa, ob, m, n, k, &alpha, a, ab, lda, b, ab, ldb, &beta, c, ct, ldc, comp, CUBLAS_GEMM_DEFAULT);
  return cublasGemmStridedBatchedEx(h, oa, ob, m, n, k, &alpha, a, ab, lda, sa, b, ab, ldb, sb, &beta,
                                    c, ct, ldc, sc, batch, comp, CUBLAS_GEMM_DEFAULT);
}

// mgrpo_blas_create makes a handle on stream s: default math (no TF32
// unless a product asks for it), no atomics (bit-reproducible products).
static cublasStatus_t mgrpo_blas_create(cublasHandle_t* h, CUstream s) {
  cublasStatus_t st = cublasCreate(h);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = cublasSetStream(*h, (cudaStream_t)s)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) return st;
  return cublasSetAtomicsMode(*h, CUBLAS_ATOMICS_NOT_ALLOWED);
}

static CUresult mgrpo_set_shared(CUfunction f, int bytes) {
  return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static CUresult mgrpo_shared_optin(CUdevice d, int* bytes) {
  return cuDeviceGetAttribute(bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// blasHandle is a cuBLAS handle bound to one stream.
type blasHandle struct{ h C.cublasHandle_t }

func newBLASHandle(s cu.Stream) (*blasHandle, error) {
	b := &blasHandle{}
	if st := C.mgrpo_blas_create(&b.h, *(*C.CUstream)(unsafe.Pointer(&s))); st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cuda: cublas handle: %s", blasStatus(st))
	}
	return b, nil
}

func (b *blasHandle) close() {
	if b.h != nil {
		C.cublasDestroy(b.h)
		b.h = nil
	}
}

// gemm queues g (already checked) on the handle's stream, as the
// column-major product computing the row-major one.
func (b *blasHandle) gemm(g Gemm) error {
	c := g.columnMajor()
	st := C.mgrpo_gemm(b.h, cbool(c.TransA), cbool(c.TransB), C.int(c.M), C.int(c.N), C.int(c.K), C.float(c.Alpha),
		ptr(c.A), C.int(c.LDA), C.longlong(c.StrideA), ptr(c.B), C.int(c.LDB), C.longlong(c.StrideB), C.float(c.Beta),
		ptr(c.C), C.int(c.LDC), C.longlong(c.StrideC), C.int(c.Batch), C.int(c.Math), cbool(c.CBF16))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cuda: gemm %d×%d×%d (%v, batch %d): %s", g.M, g.N, g.K, g.Math, g.Count(), blasStatus(st))
	}
	return nil
}

// setMaxShared lets fn take bytes of dynamic shared memory (above the
// default 48 KiB).
func setMaxShared(fn cu.Function, bytes int) error {
	if r := C.mgrpo_set_shared(*(*C.CUfunction)(unsafe.Pointer(&fn)), C.int(bytes)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: allow %d bytes of dynamic shared memory: CUresult %d", bytes, int(r))
	}
	return nil
}

// sharedOptIn is the most dynamic shared memory a block of dev may have.
func sharedOptIn(dev cu.Device) (int, error) {
	var n C.int
	if r := C.mgrpo_shared_optin(C.CUdevice(dev), &n); r != C.CUDA_SUCCESS {
		return 0, fmt.Errorf("cuda: shared memory limit: CUresult %d", int(r))
	}
	return int(n), nil
}

// ptr passes a device address to C, which casts it to a pointer.
func ptr(p Ptr) C.uintptr_t { return C.uintptr_t(p) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// blasStatus names a cuBLAS status.
func blasStatus(st C.cublasStatus_t) string {
	switch st {
	case C.CUBLAS_STATUS_NOT_INITIALIZED:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case C.CUBLAS_STATUS_ALLOC_FAILED:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case C.CUBLAS_STATUS_INVALID_VALUE:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case C.CUBLAS_STATUS_ARCH_MISMATCH:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case C.CUBLAS_STATUS_MAPPING_ERROR:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case C.CUBLAS_STATUS_EXECUTION_FAILED:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case C.CUBLAS_STATUS_INTERNAL_ERROR:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case C.CUBLAS_STATUS_NOT_SUPPORTED:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	}
	return fmt.Sprintf("cuBLAS status %d", int(st))
}
