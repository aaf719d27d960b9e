package kernels

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// HeadShape is the q/k/v layout of a row: H query heads, then G key heads,
// then G value heads, each of width E (gpu/qkv.go's headShape).
type HeadShape struct{ H, G, E int }

func (s HeadShape) check() error {
	if s.H < 1 || s.G < 1 || s.E < 1 {
		return fmt.Errorf("%w: q/k heads H=%d G=%d E=%d: want each at least 1", cuda.ErrLaunch, s.H, s.G, s.E)
	}
	return nil
}

// qkWarps is the heads one block of qk_norm and qk_norm_backward takes
// (QK_WARPS in qkv.cuh): a warp a head.
const qkWarps = 4

// AddBiasRows adds b ([d]) to each of the n rows of y ([n, d]), as the
// bias of projectQKV.
func AddBiasRows(rt cuda.Runtime, y, b cuda.Ptr, n, d int) error {
	return launchElements(rt, "add_bias_rows", int64(n)*int64(d), y, b, n, d)
}

// BiasBackward accumulates the gradient of a bias added to every row:
// db ([d]) += Σ_r dy[r] over the n rows of dy ([n, d]), summed in a fixed
// order through part (NormPartRows(n)·d floats of scratch), as
// biasBackward.
func BiasBackward(rt cuda.Runtime, db, dy, part cuda.Ptr, n, d int) error {
	if n == 0 {
		return nil
	}
	chunks := NormPartRows(n)
	grid := cuda.Dim3{X: (d + rowThreads - 1) / rowThreads, Y: chunks}
	if err := rt.Launch("column_sum_partial", grid, cuda.D1(rowThreads), 0, part, dy, n, d, normRowsPer); err != nil {
		return err
	}
	return ColumnSumAdd(rt, db, part, chunks, d)
}

// qkGrid is the grid of the kernels with a warp per head of each row.
func qkGrid(n int, s HeadShape) cuda.Dim3 {
	pairs := int64(n) * int64(s.H+s.G)
	return cuda.D1(int((pairs + qkWarps - 1) / qkWarps))
}

// QKNorm RMSNorms in place each query head (weight wq, [E]) and key head
// (wk) of the n rows of qkv ([n, (H+2G)·E]), keeping each head's 1/rms in
// inv ([n, H+G]) and, unless raw is 0, the heads before the norm in raw
// ([n, (H+G)·E]), as qkNorm.
func QKNorm(rt cuda.Runtime, qkv, raw, inv, wq, wk cuda.Ptr, n int, s HeadShape, eps float32) error {
	if err := s.check(); err != nil || n == 0 {
		return err
	}
	return rt.Launch("qk_norm", qkGrid(n, s), cuda.D1(32*qkWarps), 0, qkv, raw, inv, wq, wk, n, s.H, s.G, s.E, eps)
}

// QKNormBackward turns, in place, the gradient wrt the normed query and
// key heads of the n rows of dqkv into the gradient wrt the heads before
// the norm (raw and inv as QKNorm kept them), and accumulates the norm
// weights' gradients into dw ([2E]: q_norm's, then k_norm's), summed over
// rows and heads in a fixed order through part (NormPartRows(n)·2E floats
// of scratch), as qkNormBackward.
func QKNormBackward(rt cuda.Runtime, dqkv, dw, raw, inv, wq, wk, part cuda.Ptr, n int, s HeadShape) error {
	if err := s.check(); err != nil || n == 0 {
		return err
	}
	chunks, cols := NormPartRows(n), 2*s.E
	grid := cuda.Dim3{X: (cols + rowThreads - 1) / rowThreads, Y: chunks}
	if err := rt.Launch("qk_norm_weight_partial", grid, cuda.D1(rowThreads), 0, part, dqkv, raw, inv, n, s.H, s.G, s.E, normRowsPer); err != nil {
		return err
	}
	if err := ColumnSumAdd(rt, dw, part, chunks, cols); err != nil {
		return err
	}
	return rt.Launch("qk_norm_backward", qkGrid(n, s), cuda.D1(32*qkWarps), 0, dqkv, raw, inv, wq, wk, n, s.H, s.G, s.E)
}
