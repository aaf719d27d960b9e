package kernels

import (
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// AttnShape is the shape of a batch's attention: B sequences of at most T
// rows, H query heads and G key/value heads of width E (16, 32, 64 or
// 128), and the kernels' products: MathFP32 (the zero value) runs the
// CUDA-core kernels of attention.cuh, MathTF32 and MathBF16 the
// tensor-core kernels of attention_tc.cuh (widths TensorAttention has).
type AttnShape struct {
	B, T, H, G, E int
	Math          cuda.Math
}

// attTile is the rows of an attention block and of its shared-memory
// tiles (ATT_TILE in attention.cuh); attThreads its threads. tcTile is
// the tensor-core kernels' (ATC_ROWS in attention_tc.cuh).
const (
	attTile    = 32
	attThreads = 128
	tcTile     = 64
)

// TensorAttention reports whether attention of head width e has
// tensor-core kernels (attention_tc.cuh): 32, 64 and 128.
func TensorAttention(e int) bool { return e == 32 || e == 64 || e == 128 }

func (s AttnShape) check() error {
	if s.E != 16 && s.E != 32 && s.E != 64 && s.E != 128 || s.G < 1 || s.H%s.G != 0 || s.B < 1 || s.T < 1 {
		return fmt.Errorf("%w: attention B=%d T=%d H=%d G=%d E=%d: want E in {16, 32, 64, 128} and G dividing H", cuda.ErrLaunch, s.B, s.T, s.H, s.G, s.E)
	}
	if s.Math != cuda.MathFP32 && (s.Math != cuda.MathTF32 && s.Math != cuda.MathBF16 || !TensorAttention(s.E)) {
		return fmt.Errorf("%w: attention E=%d in %v: the tensor-core kernels take TF32 or bf16 and E in {32, 64, 128}", cuda.ErrLaunch, s.E, s.Math)
	}
	return nil
}

// tensor reports whether s runs on the tensor cores.
func (s AttnShape) tensor() bool { return s.Math != cuda.MathFP32 }

// name is the kernel's name: kernel (attention_forward, ...) with the
// precision of the tensor-core kernels and the width.
func (s AttnShape) name(kernel string) string {
	if s.tensor() {
		return fmt.Sprintf("%s_%v_e%d", kernel, s.Math, s.E)
	}
	return fmt.Sprintf("%s_e%d", kernel, s.E)
}

// The tensor-core kernels, for their shared memory.
const (
	tcForward = iota
	tcDq
	tcDkv
)

// tcShared is the dynamic shared memory of tensor-core kernel k
// (att_tc_shared in attention_tc.cuh, which the emulator checks it
// against): 128 bytes of alignment slack, the operand tiles [64, E+pad]
// (forward three, backward four), each of 4 warps' fp32 product tile
// [16, 68] and operand tile [16, 64+pad], the forward's row factors [16,
// 16] a warp, dkv's lse and delta [64]; every region rounded up to 128
// bytes.
func (s AttnShape) tcShared(k int) int {
	elem, pad := 2, 8
	if s.Math == cuda.MathTF32 {
		elem, pad = 4, 4
	}
	r := func(bytes int) int { return (bytes + 127) / 128 * 128 }
	tiles, extra := 4, 0
	switch k {
	case tcForward:
		tiles, extra = 3, 4*r(16*16*4)
	case tcDkv:
		extra = 2 * r(tcTile*4)
	}
	return 128 + tiles*r(tcTile*(s.E+pad)*elem) + 4*(r(16*(tcTile+4)*4)+r(16*(tcTile+pad)*elem)) + extra
}

// scale is 1/√E in float32, as the CPU's attention computes it.
func (s AttnShape) scale() float32 { return float32(1 / math.Sqrt(float64(s.E))) }

// grid is a block per 32 rows (64 on the tensor cores) of each of heads
// heads of each sequence.
func (s AttnShape) grid(heads int) cuda.Dim3 {
	tile := attTile
	if s.tensor() {
		tile = tcTile
	}
	return cuda.Dim3{X: (s.T + tile - 1) / tile, Y: heads, Z: s.B}
}

// AttentionForward computes causal attention over the packed rows (see
// attention.cuh): att ([N, H·E]) and the log-sum-exp of each row and head
// (lse [N, H], for the backward pass) from qkv ([N, (H+2G)·E], q and k
// rotated) and the rows of each sequence (start [B+1], pre and from [B],
// int32), as attention does with its probabilities; on the tensor cores
// when s.Math says so.
func AttentionForward(rt cuda.Runtime, att, lse, qkv, start, pre, from cuda.Ptr, s AttnShape) error {
	if err := s.check(); err != nil {
		return err
	}
	shared := 4 * attTile * (3*s.E + 1)
	if s.tensor() {
		shared = s.tcShared(tcForward)
	}
	return rt.Launch(s.name("attention_forward"), s.grid(s.H), cuda.D1(attThreads), shared,
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
	dq := 4 * attTile * (4*s.E + 2)
	dkv := dq + 4*2*attTile
	if s.tensor() {
		dq, dkv = s.tcShared(tcDq), s.tcShared(tcDkv)
	}
	if err := rt.Launch(s.name("attention_backward_dq"), s.grid(s.H), cuda.D1(attThreads), dq, args...); err != nil {
		return err
	}
	return rt.Launch(s.name("attention_backward_dkv"), s.grid(s.G), cuda.D1(attThreads), dkv, args...)
}
