//go:build cuda || cudaemu

package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// attnCase is a batch for TestCUDAAttention: sequences of the given prompt
// and completion lengths, packed as the CPU engine packs them.
type attnCase struct {
	name    string
	h, g, e int
	t       int      // the context: the most rows a sequence may have
	lens    [][2]int // prompt, completion lengths
	prompts []int    // sequences i > 0 with prompts[i] == prompts[i-1] share it (a group)
}

var attnCases = []attnCase{
	{"one row", 3, 1, 64, 8, [][2]int{{1, 1}}, []int{0}},
	{"E=16 ratio 1 shared prompts", 2, 2, 16, 40, [][2]int{{9, 31}, {9, 4}, {2, 3}}, []int{0, 0, 1}},
	{"E=32 ratio 1 context limit", 2, 2, 32, 64, [][2]int{{10, 55}, {1, 2}, {30, 5}}, []int{0, 1, 2}},
	{"E=64 ratio 3 shared prompts", 9, 3, 64, 48, [][2]int{{12, 9}, {12, 30}, {12, 2}, {5, 7}, {20, 20}, {20, 1}}, []int{0, 0, 0, 1, 2, 2}},
	{"E=128 ratio 7 shared prompts", 7, 1, 128, 80, [][2]int{{40, 40}, {40, 33}, {3, 60}}, []int{0, 0, 1}},
	{"E=64 ratio 3 context limit, tiles of 64", 3, 1, 64, 160, [][2]int{{70, 90}, {70, 3}, {1, 130}}, []int{0, 0, 1}},
}

// sequences builds the case's token sequences (random ids; a group's
// prompts equal).
func (c attnCase) sequences(rng *rand.Rand) []Sequence {
	seqs := make([]Sequence, len(c.lens))
	for i, l := range c.lens {
		if i > 0 && c.prompts[i] == c.prompts[i-1] {
			seqs[i].Prompt = seqs[i-1].Prompt
		} else {
			seqs[i].Prompt = make([]int, l[0])
			for j := range seqs[i].Prompt {
				seqs[i].Prompt[j] = rng.IntN(60)
			}
		}
		seqs[i].Completion = make([]int, l[1])
	}
	return seqs
}

// attnTolerances are the attention kernels' tolerances against the
// float64 CPU attention (atol, rtol forward on att; atol, rtol backward on
// dqkv) for inputs of unit variance: the CUDA-core kernels in fp32; the
// tensor-core kernels with TF32 and bf16 products, whose inputs,
// probabilities and ds are rounded to 10 and 7 mantissa bits. Measured on
// the emulator, the worst |diff| − rtol·|want| over the cases is
//
//	fp32  att 6.1e-7, dqkv 1.3e-6
//	TF32  att 8.5e-4, dqkv 2.1e-3
//	bf16  att 8.0e-3, dqkv 2.1e-2
//
// (TF32 8× below bf16: the inputs' rounding dominates); the tensor
// cores' own summation order moves the GPU's results by far less.
var attnTolerances = map[cuda.Math][4]float64{
	cuda.MathFP32: {2e-6, 1e-5, 1e-5, 1e-4},
	cuda.MathTF32: {2e-3, 2e-3, 5e-3, 5e-3},
	cuda.MathBF16: {2e-2, 1e-2, 5e-2, 2e-2},
}

// TestCUDAAttention runs each case on the CUDA-core kernels and, for the
// widths that have them, on the tensor-core kernels in TF32 and bf16.
func TestCUDAAttention(t *testing.T) {
	rt := cudatest.Open(t)
	for i, tc := range attnCases {
		for _, m := range []cuda.Math{cuda.MathFP32, cuda.MathTF32, cuda.MathBF16} {
			if m != cuda.MathFP32 && !kernels.TensorAttention(tc.e) {
				continue
			}
			t.Run(tc.name+" "+m.String(), func(t *testing.T) { runAttention(t, rt, rand.New(rand.NewPCG(13, uint64(i))), tc, m) })
		}
	}
}

// runAttention compares the engine's composition, RoPE then attention
// forward, then attention backward then RoPE −1, with the CPU's attention
// (which rotates as it goes) in float64, on the kernels of math m.
func runAttention(t *testing.T, rt cuda.Runtime, rng *rand.Rand, tc attnCase, m cuda.Math) {
	s, pos := twinLoad(tc.sequences(rng), tc.t, tc.h, tc.g, tc.e, true)
	n, qs, he := len(pos), s.stride(), tc.h*tc.e
	qkv, datt := devRand(rng, n*qs, 1), devRand(rng, n*he, 1)
	cos, sin := twinRopeTable[float64](tc.t, tc.e, 10000)
	att, _, dqkv := twinAttention(to64(qkv), to64(datt), s, &rotation[float64]{pos: pos, cos: cos, sin: sin})

	cos32, sin32 := twinRopeTable[float32](tc.t, tc.e, 10000)
	dCos, dSin, dPos := cudatest.Upload(t, rt, cos32), cudatest.Upload(t, rt, sin32), cudatest.Upload(t, rt, pos)
	dStart, dPre, dFrom := cudatest.Upload(t, rt, s.start), cudatest.Upload(t, rt, s.pre), cudatest.Upload(t, rt, s.from)
	shape := kernels.AttnShape{B: s.B, T: s.T, H: s.H, G: s.G, E: s.E, Math: m}
	tol := attnTolerances[m]
	dQKV, dDatt := cudatest.Upload(t, rt, qkv), cudatest.Upload(t, rt, datt)
	cudatest.Must(t, kernels.RoPE(rt, dQKV, dPos, dCos, dSin, n, qs, tc.h+tc.g, tc.e, 1))
	dAtt, dLse := devOut(t, rt, n*he), devOut(t, rt, n*tc.h)
	got := deterministic(t, "attention forward", func() []float32 {
		cudatest.Must(t, kernels.AttentionForward(rt, dAtt, dLse, dQKV, dStart, dPre, dFrom, shape))
		return devGet(t, rt, dAtt, n*he)
	})
	worstAtt := worstOver(got, att, tol[1])
	closeAll(t, "att", got, att, tol[0], tol[1])
	gotD := deterministic(t, "attention backward", func() []float32 {
		dD, delta := devOut(t, rt, n*qs), devOut(t, rt, n*tc.h)
		cudatest.Must(t, kernels.AttentionBackward(rt, dD, delta, dDatt, dAtt, dQKV, dLse, dStart, dPre, dFrom, n, shape))
		cudatest.Must(t, kernels.RoPE(rt, dD, dPos, dCos, dSin, n, qs, tc.h+tc.g, tc.e, -1))
		return devGet(t, rt, dD, n*qs)
	})
	t.Logf("worst |diff| − rtol·|want|: att %.3g, dqkv %.3g", worstAtt, worstOver(gotD, dqkv, tol[3]))
	closeAll(t, "dqkv", gotD, dqkv, tol[2], tol[3])
}

// worstOver is the largest |got − want| − rtol·|want|.
func worstOver(got []float32, want []float64, rtol float64) float64 {
	worst := math.Inf(-1)
	for i, w := range want {
		worst = max(worst, math.Abs(float64(got[i])-w)-rtol*math.Abs(w))
	}
	return worst
}

func TestCUDAAttentionRejectsShapes(t *testing.T) {
	rt := cudatest.Open(t)
	p := devOut(t, rt, 1)
	for _, s := range []kernels.AttnShape{{B: 1, T: 1, H: 2, G: 2, E: 48}, {B: 1, T: 1, H: 3, G: 2, E: 64},
		{B: 1, T: 1, H: 2, G: 2, E: 16, Math: cuda.MathBF16}} {
		if err := kernels.AttentionForward(rt, p, p, p, p, p, p, s); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}
