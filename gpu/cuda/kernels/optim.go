package kernels

import (
	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// ReduceParts is the number of blocks of every two-pass reduction. It is
// fixed, so a sum's rounding never depends on the buffer's size or the
// GPU: the same inputs give the same bits.
const ReduceParts = 512

// reduceThreads is the block of the reductions.
const reduceThreads = 256

// SumSquares writes Σ x² over n floats to out (one float64), through part
// (ReduceParts float64s of scratch): the squared gradient norm.
func SumSquares(rt cuda.Runtime, out, part, x cuda.Ptr, n int64) error {
	if err := rt.Launch("sum_squares_partial", cuda.D1(ReduceParts), cuda.D1(reduceThreads), 0, part, x, n); err != nil {
		return err
	}
	return rt.Launch("sum_finish", cuda.D1(1), cuda.D1(reduceThreads), 0, out, part, ReduceParts)
}

// ClipScale scales n floats of g by maxNorm/(norm+1e-6) when norm =
// √sumsq (one float64 on the device, from SumSquares) exceeds maxNorm > 0
// and is finite, as optim.ClipGlobalNorm; otherwise it leaves g alone.
func ClipScale(rt cuda.Runtime, g cuda.Ptr, n int64, sumsq cuda.Ptr, maxNorm float64) error {
	return launchElements(rt, "clip_scale", n, g, n, sumsq, maxNorm)
}

// adamwArgs are the trailing arguments of the AdamW kernels.
func adamwArgs(n int64, nodecay cuda.Ptr, nranges int, k *vec.AdamWCoeffs) []any {
	return []any{n, nodecay, nranges, k.B1, k.C1, k.B2, k.C2, k.StepSize, k.InvSqBC2, k.Eps, k.Decay}
}

// AdamW takes one AdamW step in place on n elements of w, m and v from g,
// as vec.AdamW (bit for bit), with k's decay except inside the nranges
// no-decay ranges at nodecay (ascending [lo, hi) int64 pairs: the norm
// weights).
func AdamW(rt cuda.Runtime, w, g, m, v cuda.Ptr, n int64, nodecay cuda.Ptr, nranges int, k *vec.AdamWCoeffs) error {
	args := append([]any{w, g, m, v}, adamwArgs(n, nodecay, nranges, k)...)
	return rt.Launch("adamw", cuda.D1(ReduceParts), cuda.D1(reduceThreads), 0, args...)
}

// AdamWPreview writes to out (three float64s) what AdamW would do, doing
// nothing: Σ (w'−w)², Σ w², and the first element whose w', m' or v' would
// be non-finite (or v' negative), or −1, as vec.AdamWPreview; part holds
// 3·ReduceParts float64s of scratch.
func AdamWPreview(rt cuda.Runtime, out, part, w, g, m, v cuda.Ptr, n int64, nodecay cuda.Ptr, nranges int, k *vec.AdamWCoeffs) error {
	args := append([]any{part, w, g, m, v}, adamwArgs(n, nodecay, nranges, k)...)
	if err := rt.Launch("adamw_preview_partial", cuda.D1(ReduceParts), cuda.D1(reduceThreads), 0, args...); err != nil {
		return err
	}
	return rt.Launch("adamw_preview_finish", cuda.D1(1), cuda.D1(reduceThreads), 0, out, part, ReduceParts)
}

// FirstNonFinite writes to out (one int64) the index of the first NaN or
// ±Inf of n floats at x, or −1, through part (ReduceParts int64s).
func FirstNonFinite(rt cuda.Runtime, out, part, x cuda.Ptr, n int64) error {
	if err := rt.Launch("first_nonfinite_partial", cuda.D1(ReduceParts), cuda.D1(reduceThreads), 0, part, x, n); err != nil {
		return err
	}
	return rt.Launch("first_finish", cuda.D1(1), cuda.D1(reduceThreads), 0, out, part, ReduceParts)
}
