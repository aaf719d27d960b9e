package kernels

import (
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// AttnShape is the shape of a batch's attention: B sequences of at most T
// rows, H query heads and G key/value heads of width E (16, 32, 64 or 128).
type AttnShape struct{ B, T, H, G, E int }

// attTile is the rows of an attention block and of its shared-memory
// tiles (ATT_TILE in attention.cuh); attThreads its threads.
const (
	attTile    = 32
	attThreads = 128
)

func (s AttnShape) check() error {
	if s.E != 16 && s.E != 32 && s.E != 64 && s.E != 128 || s.G < 1 || s.H%s.G != 0 || s.B < 1 || s.T < 1 {
		return fmt.Errorf("%w: attention B=%d T=%d H=%d G=%d E=%d: want E in {16, 32, 64, 128} and G dividing H", cuda.ErrLaunch, s.B, s.T, s.H, s.G, s.E)
	}
	return nil
}

// scale is 1/√E in float32, as the CPU's attention computes it.
func (s AttnShape) scale() float32 { return float32(1 / math.Sqrt(float64(s.E))) }

// grid is a block per 32 rows of each of heads heads of each sequence.
func (s AttnShape) grid(heads int) cuda.Dim3 {
	return cuda.Dim3{X: (s.T + attTile - 1) / attTile, Y: heads, Z: s.B}
}

// AttentionForward computes causal attention over the packed rows (see
// attention.cuh): att ([N, H·E]) and the log-sum-exp of each row and head
// (lse [N, H], for the backward pass) from qkv ([N, (H+2G)·E], q and k
// rotated) and the rows of each sequence (start [B+1], pre and from [B],
// int32), as attention does with its probabilities.
func AttentionForward(rt cuda.Runtime, att, lse, qkv, start, pre, from cuda.Ptr, s AttnShape) error {
	if err := s.check(); err != nil {
		return err
	}
	shared := 4 * attTile * (3*s.E + 1)
	return rt.Launch(fmt.Sprintf("attention_forward_e%d", s.E), s.grid(s.H), cuda.D1(attThreads), shared,
		att, lse, qkv, start, pre, from, s.H, s.G, s.scale())
}

// AttentionBackward writes dqkv ([N, (H+2G)·E], the gradient wrt the
// rotated q and k, and v) from datt, as attentionBackward before its
// unrotation (RoPE with sign −1 follows). att, lse are the forward pass's;
// delta ([N, H]) is scratch; n is the rows in use.
func AttentionBackward(rt cuda.Runtime, dqkv, delta, datt, att, qkv, lse, start, pre, from cuda.Ptr, n int, s AttnShape) error {
	if err := s.check(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	warps := 256 / 32
	if err := rt.Launch("attention_backward_delta", cuda.D1((n*s.H+warps-1)/warps), cuda.D1(256), 0, delta, att, datt, n, s.H, s.E); err != nil {
		return err
	}
	args := []any{dqkv, datt, qkv, lse, delta, start, pre, from, s.H, s.G, s.scale()}
	shared := 4 * attTile * (4*s.E + 2)
	if err := rt.Launch(fmt.Sprintf("attention_backward_dq_e%d", s.E), s.grid(s.H), cuda.D1(attThreads), shared, args...); err != nil {
		return err
	}
	return rt.Launch(fmt.Sprintf("attention_backward_dkv_e%d", s.E), s.grid(s.G), cuda.D1(attThreads), shared+4*2*attTile, args...)
}
