package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// RMSNorm normalises n rows of width d: y = x·inv·w with inv =
// 1/√(mean(x²) + eps), keeping inv ([n]) for the backward pass (y, x [n, d],
// w [d]), as rmsnorm; unless y16 is 0 it also writes y rounded to bf16
// there ([n, d] uint16s: a bf16 product's operand).
func RMSNorm(rt cuda.Runtime, y, y16, inv, x, w cuda.Ptr, n, d int, eps float32) error {
	return launchRows(rt, "rmsnorm", n, rowThreads, y, y16, inv, x, w, n, d, eps)
}

// normRowsPer is the rows one block of the weight gradient's first pass
// sums: small enough to spread a batch over the GPU, large enough that
// the second pass is short.
const normRowsPer = 64

// NormPartRows is the rows of the scratch RMSNormBackward needs for n
// rows: part holds NormPartRows(n)·d floats.
func NormPartRows(n int) int { return max((n+normRowsPer-1)/normRowsPer, 1) }

// RMSNormBackward accumulates rmsnorm's gradients, as rmsnormBackward:
// dx += s·g − s³·(g·x)/d·x with g = dy⊙w (dx, dy, x [n, d], inv [n]), and
// dw ([d]) += Σ_r dy[r]⊙x[r]·inv[r], summed in a fixed order through part
// (NormPartRows(n)·d floats of scratch). Unless dx16 is 0 it also writes
// the new dx rounded to bf16 there ([n, d] uint16s).
func RMSNormBackward(rt cuda.Runtime, dx, dx16, dw, dy, x, inv, w, part cuda.Ptr, n, d int) error {
	if n == 0 {
		return nil
	}
	if err := launchRows(rt, "rmsnorm_backward", n, rowThreads, dx, dx16, dy, x, inv, w, n, d); err != nil {
		return err
	}
	cols := (d + rowThreads - 1) / rowThreads
	chunks := NormPartRows(n)
	if err := rt.Launch("rmsnorm_weight_partial", cuda.Dim3{X: cols, Y: chunks}, cuda.D1(rowThreads), 0, part, dy, x, inv, n, d, normRowsPer); err != nil {
		return err
	}
	return ColumnSumAdd(rt, dw, part, chunks, d)
}

// ColumnSumAdd adds the column sums of part ([rows, d]) to dst ([d]),
// rows in order.
func ColumnSumAdd(rt cuda.Runtime, dst, part cuda.Ptr, rows, d int) error {
	return rt.Launch("column_sum_add", cuda.D1((d+rowThreads-1)/rowThreads), cuda.D1(rowThreads), 0, dst, part, rows, d)
}
