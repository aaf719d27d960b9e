//go:build cudaemu

package emu

import (
	"unsafe"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// matrix is one operand of a Gemm batch as the emulator reads it: rows ×
// cols, row-major with leading dimension ld, matrix i at stride·i.
type matrix struct {
	mem        []byte
	rows, cols int
	ld         int
	stride     int64
	bf16       bool
}

// extent is the number of elements the operand spans over count matrices.
func (m matrix) extent(count int) int64 {
	if m.rows == 0 || m.cols == 0 {
		return 0
	}
	return int64(count-1)*m.stride + int64((m.rows-1)*m.ld+m.cols)
}

func (m matrix) elemSize() int64 {
	if m.bf16 {
		return 2
	}
	return 4
}

// at reads element (r, c) of matrix i as a float32.
func (m matrix) at(i, r, c int) float32 {
	k := int64(i)*m.stride + int64(r*m.ld+c)
	if m.bf16 {
		return cuda.BF16ToFloat32(*(*uint16)(unsafe.Pointer(&m.mem[2*k])))
	}
	return *(*float32)(unsafe.Pointer(&m.mem[4*k]))
}

// set writes element (r, c) of matrix i, rounding to bf16 for a bf16 C.
func (m matrix) set(i, r, c int, v float32) {
	k := int64(i)*m.stride + int64(r*m.ld+c)
	if m.bf16 {
		*(*uint16)(unsafe.Pointer(&m.mem[2*k])) = cuda.BF16(v)
		return
	}
	*(*float32)(unsafe.Pointer(&m.mem[4*k])) = v
}

// operands returns A, B and C of g as stored (A and B before op).
func operands(g cuda.Gemm) (a, b, c matrix) {
	a = matrix{rows: g.M, cols: g.K, ld: g.LDA, stride: g.StrideA, bf16: g.Math == cuda.MathBF16}
	if g.TransA {
		a.rows, a.cols = g.K, g.M
	}
	b = matrix{rows: g.K, cols: g.N, ld: g.LDB, stride: g.StrideB, bf16: g.Math == cuda.MathBF16}
	if g.TransB {
		b.rows, b.cols = g.N, g.K
	}
	c = matrix{rows: g.M, cols: g.N, ld: g.LDC, stride: g.StrideC, bf16: g.CBF16}
	return a, b, c
}

// gemm computes one product of the batch as cuBLAS specifies it: inputs
// rounded as the math mode rounds them (TF32: cuda.TF32; bf16: stored so),
// products summed in fp32 in k order, then C = alpha·sum + beta·C (C not
// read when beta is 0).
func gemm(g cuda.Gemm, a, b, c matrix, i int) {
	round := func(x float32) float32 { return x }
	if g.Math == cuda.MathTF32 {
		round = cuda.TF32
	}
	ar, bc := make([]float32, g.K), make([]float32, g.K*g.N) // a row of op(A); op(B) by column
	for p := 0; p < g.K; p++ {
		for j := 0; j < g.N; j++ {
			if g.TransB {
				bc[j*g.K+p] = round(b.at(i, j, p))
			} else {
				bc[j*g.K+p] = round(b.at(i, p, j))
			}
		}
	}
	for r := 0; r < g.M; r++ {
		for p := range ar {
			if g.TransA {
				ar[p] = round(a.at(i, p, r))
			} else {
				ar[p] = round(a.at(i, r, p))
			}
		}
		for j := 0; j < g.N; j++ {
			var sum float32
			for p, x := range ar {
				sum += x * bc[j*g.K+p]
			}
			v := g.Alpha * sum
			if g.Beta != 0 {
				v += g.Beta * c.at(i, r, j)
			}
			c.set(i, r, j, v)
		}
	}
}
