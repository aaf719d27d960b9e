//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// The kernels of Qwen's attention inputs (qkv.cuh) against their CPU
// twins in gpu/qkv.go, float64, twice for bits: one row, 1, 3 and 7
// query heads per key/value head, head widths 8 to 128, more rows than
// one chunk of the weight gradients' first pass.

// qkvCases are the shapes: n rows, d hidden, h query heads, g key/value
// heads of width e (e ≠ d/h in most).
var qkvCases = []struct{ n, d, h, g, e int }{
	{1, 32, 2, 2, 16}, {5, 64, 3, 1, 32}, {70, 48, 7, 1, 64}, {130, 64, 6, 2, 128}, {3, 896, 14, 2, 64}, {9, 16, 4, 2, 8},
}

// TestCUDAQKVBias: the q/k/v product plus its bias (the engine's cuBLAS
// product, then add_bias_rows) against projectQKV, and the bias gradient
// (column_sum_partial, column_sum_add) against biasBackward.
func TestCUDAQKVBias(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(13, 1))
	for _, tc := range qkvCases {
		t.Run(fmt.Sprintf("n=%d_H=%d_G=%d_E=%d", tc.n, tc.h, tc.g, tc.e), func(t *testing.T) {
			qs := (tc.h + 2*tc.g) * tc.e
			x, w, b := devRand(rng, tc.n*tc.d, 1), devRand(rng, qs*tc.d, 0.2), devRand(rng, qs, 1)
			want := make([]float64, tc.n*qs)
			twinProjectQKV(want, to64(x), to64(w), to64(b), tc.n, tc.d, qs)
			dX, dW, dB := cudatest.Upload(t, rt, x), cudatest.Upload(t, rt, w), cudatest.Upload(t, rt, b)
			got := deterministic(t, "add_bias_rows", func() []float32 {
				out := devOut(t, rt, tc.n*qs)
				cudatest.Must(t, rt.Gemm(cuda.Gemm{TransB: true, M: tc.n, N: qs, K: tc.d, Alpha: 1, A: dX, B: dW, C: out,
					LDA: tc.d, LDB: tc.d, LDC: qs, Math: cuda.MathFP32}))
				cudatest.Must(t, kernels.AddBiasRows(rt, out, dB, tc.n, qs))
				return devGet(t, rt, out, tc.n*qs)
			})
			closeAll(t, "qkv + bias", got, want, 2e-6*math.Sqrt(float64(tc.d)), 1e-5)

			dy, db0 := devRand(rng, tc.n*qs, 1), devRand(rng, qs, 1) // the gradient accumulates
			wantDB := to64(db0)
			twinBiasBackward(wantDB, to64(dy), tc.n)
			dDy, part := cudatest.Upload(t, rt, dy), devOut(t, rt, kernels.NormPartRows(tc.n)*qs)
			gotDB := deterministic(t, "bias gradient", func() []float32 {
				out := cudatest.Upload(t, rt, db0)
				cudatest.Must(t, kernels.BiasBackward(rt, out, dDy, part, tc.n, qs))
				return devGet(t, rt, out, qs)
			})
			closeAll(t, "bias gradient", gotDB, wantDB, 1e-6*math.Sqrt(float64(tc.n)), 1e-6)
		})
	}
}

// TestCUDAQKNorm: qk_norm (with and without keeping the heads) against
// qkNorm, and its backward (qk_norm_weight_partial, column_sum_add,
// qk_norm_backward) against qkNormBackward; the value heads stay as they
// were.
func TestCUDAQKNorm(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(13, 2))
	const eps = 1e-6
	for _, tc := range qkvCases {
		t.Run(fmt.Sprintf("n=%d_H=%d_G=%d_E=%d", tc.n, tc.h, tc.g, tc.e), func(t *testing.T) {
			s := kernels.HeadShape{H: tc.h, G: tc.g, E: tc.e}
			heads, qs := tc.h+tc.g, (tc.h+2*tc.g)*tc.e
			qkv, wq, wk := devRand(rng, tc.n*qs, 1), devRand(rng, tc.e, 1), devRand(rng, tc.e, 1)
			qkv[0] = 30 // a head far from unit scale
			want, raw, inv := to64(qkv), make([]float64, tc.n*heads*tc.e), make([]float64, tc.n*heads)
			twinQKNorm(want, raw, inv, to64(wq), to64(wk), tc.h, tc.g, tc.e, tc.n, eps)

			dWq, dWk := cudatest.Upload(t, rt, wq), cudatest.Upload(t, rt, wk)
			dRaw, dInv := devOut(t, rt, tc.n*heads*tc.e), devOut(t, rt, tc.n*heads)
			dQKV := devOut(t, rt, tc.n*qs)
			got := deterministic(t, "qk_norm", func() []float32 {
				cudatest.Must(t, rt.Upload(dQKV, cuda.Bytes(qkv)))
				cudatest.Must(t, kernels.QKNorm(rt, dQKV, dRaw, dInv, dWq, dWk, tc.n, s, eps))
				return devGet(t, rt, dQKV, tc.n*qs)
			})
			closeAll(t, "qk_norm", got, want, 1e-6, 2e-6)
			closeAll(t, "qk_norm inv", devGet(t, rt, dInv, tc.n*heads), inv, 0, 2e-6)
			sameBits(t, "qk_norm raw", devGet(t, rt, dRaw, tc.n*heads*tc.e), to32(raw))
			noRaw := cudatest.Upload(t, rt, qkv) // scoring keeps no heads
			cudatest.Must(t, kernels.QKNorm(rt, noRaw, 0, devOut(t, rt, tc.n*heads), dWq, dWk, tc.n, s, eps))
			sameBits(t, "qk_norm without raw", devGet(t, rt, noRaw, tc.n*qs), got)

			dy, dw0 := devRand(rng, tc.n*qs, 1), devRand(rng, 2*tc.e, 1) // the weights' gradient accumulates
			wantDX, dw := to64(dy), to64(dw0)
			twinQKNormBackward(wantDX, dw[:tc.e], dw[tc.e:], raw, inv, to64(wq), to64(wk), tc.h, tc.g, tc.e, tc.n)
			part, dDw := devOut(t, rt, kernels.NormPartRows(tc.n)*2*tc.e), devOut(t, rt, 2*tc.e)
			dDy := devOut(t, rt, tc.n*qs)
			gotDX := deterministic(t, "qk_norm_backward", func() []float32 {
				cudatest.Must(t, rt.Upload(dDy, cuda.Bytes(dy)))
				cudatest.Must(t, rt.Upload(dDw, cuda.Bytes(dw0)))
				cudatest.Must(t, kernels.QKNormBackward(rt, dDy, dDw, dRaw, dInv, dWq, dWk, part, tc.n, s))
				return append(devGet(t, rt, dDy, tc.n*qs), devGet(t, rt, dDw, 2*tc.e)...)
			})
			closeAll(t, "qk_norm dx", gotDX[:tc.n*qs], wantDX, 2e-6, 1e-5)
			closeAll(t, "qk_norm dw", gotDX[tc.n*qs:], dw, 1e-5*math.Sqrt(float64(tc.n*tc.h)), 1e-5)
		})
	}
}

// TestCUDAArchFixtureParity: the peer's Qwen2, Qwen3 and llama3-RoPE
// checkpoints (testdata/qwen) whose head width the CUDA engine's attention
// takes, loaded into a model and a learner on the device (fp32 products),
// score the peer's sequences within 1e-4 per token, as on the CPU
// (TestArchFixtureParity).
func TestCUDAArchFixtureParity(t *testing.T) {
	dev := testCUDADevice(t, cuda.MathFP32)
	ran := 0
	for _, tc := range archFixtures {
		if checkCUDAConfig(tc.want) != nil {
			continue
		}
		cpu, err := LoadModel(filepath.Join(archFixtureDir, tc.name))
		if err != nil {
			t.Fatal(err)
		}
		_, m := cudaTestModelOf(t, cpu, cuda.MathFP32)
		lc := DefaultLearnerConfig()
		lc.Device = dev
		l, err := NewLearner(cpu, lc)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s on the device: worst difference from the peer %.3g", tc.name, fixtureParity(t, tc.name, m, l))
		ran++
	}
	if ran < 3 {
		t.Errorf("%d fixtures have a head width the CUDA engine takes, want the three -e16/-e32 ones", ran)
	}
}
