//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// Each CUDA kernel against its CPU twin (cuda_twins_test.go), on the
// runtime of the build (cudatest.Open: the emulator with -tags cudaemu,
// GPU 0 with -tags cuda), twice for bit-reproducibility. Tolerances are
// against the float64 CPU kernel unless the kernel must match the float32
// CPU bit for bit (copies, sums in the CPU's order).

func TestCUDAEmbed(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(11, 1))
	for _, tc := range []struct{ v, d, n int }{{98, 32, 1}, {98, 64, 300}, {49152, 64, 70}} {
		t.Run(fmt.Sprintf("V=%d_d=%d_n=%d", tc.v, tc.d, tc.n), func(t *testing.T) {
			table, dy := devRand(rng, tc.v*tc.d, 1), devRand(rng, tc.n*tc.d, 1)
			tokens := make([]int32, tc.n)
			for i := range tokens {
				tokens[i] = int32(rng.IntN(min(tc.v, 40))) // repeats
			}
			tokens[tc.n-1] = int32(tc.v - 1)
			want := make([]float32, tc.n*tc.d)
			twinEmbed(want, table, tokens, tc.d)
			dtable := devRand(rng, tc.v*tc.d, 1) // the gradient accumulates
			wantDT := append([]float32(nil), dtable...)
			twinEmbedBackward(wantDT, dy, tokens, tc.d)

			dTable, dTok, dDy := cudatest.Upload(t, rt, table), cudatest.Upload(t, rt, tokens), cudatest.Upload(t, rt, dy)
			rows, offsets, uniq := kernels.TokenRows(tokens)
			dRows, dOff, dUniq := cudatest.Upload(t, rt, rows), cudatest.Upload(t, rt, offsets), cudatest.Upload(t, rt, uniq)
			got := deterministic(t, "embed", func() []float32 {
				out := devOut(t, rt, tc.n*tc.d)
				cudatest.Must(t, kernels.Embed(rt, out, dTable, dTok, tc.n, tc.d))
				return devGet(t, rt, out, tc.n*tc.d)
			})
			sameBits(t, "embed", got, want)
			gotDT := deterministic(t, "embed_backward", func() []float32 {
				out := cudatest.Upload(t, rt, dtable)
				cudatest.Must(t, kernels.EmbedBackward(rt, out, dDy, dRows, dOff, dUniq, len(uniq), tc.d))
				return devGet(t, rt, out, tc.v*tc.d)
			})
			sameBits(t, "embed_backward", gotDT, wantDT) // the CPU's order: row by row
		})
	}
}

func TestCUDARMSNorm(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(11, 2))
	const eps = 1e-6
	for _, tc := range []struct{ n, d int }{{1, 32}, {7, 64}, {130, 576}, {3, 896}} {
		t.Run(fmt.Sprintf("n=%d_d=%d", tc.n, tc.d), func(t *testing.T) {
			x, w, dy := devRand(rng, tc.n*tc.d, 1), devRand(rng, tc.d, 1), devRand(rng, tc.n*tc.d, 1)
			dx0, dw0 := devRand(rng, tc.n*tc.d, 1), devRand(rng, tc.d, 1) // gradients accumulate
			y, inv := make([]float64, tc.n*tc.d), make([]float64, tc.n)
			twinRMSNorm(y, inv, to64(x), to64(w), tc.d, eps)
			dx, dw := to64(dx0), to64(dw0)
			twinRMSNormBackward(dx, dw, to64(dy), to64(x), inv, to64(w), tc.d)

			dX, dW, dDy := cudatest.Upload(t, rt, x), cudatest.Upload(t, rt, w), cudatest.Upload(t, rt, dy)
			dInv := devOut(t, rt, tc.n)
			gotY := deterministic(t, "rmsnorm", func() []float32 {
				out := devOut(t, rt, tc.n*tc.d)
				cudatest.Must(t, kernels.RMSNorm(rt, out, 0, dInv, dX, dW, tc.n, tc.d, eps))
				return devGet(t, rt, out, tc.n*tc.d)
			})
			closeAll(t, "rmsnorm y", gotY, y, 1e-6, 2e-6)
			closeAll(t, "rmsnorm inv", devGet(t, rt, dInv, tc.n), inv, 0, 2e-6)
			withBF16Copy(t, rt, "rmsnorm y", gotY, func(h cuda.Ptr) cuda.Ptr {
				out := devOut(t, rt, tc.n*tc.d)
				cudatest.Must(t, kernels.RMSNorm(rt, out, h, dInv, dX, dW, tc.n, tc.d, eps))
				return out
			})
			part := devOut(t, rt, kernels.NormPartRows(tc.n)*tc.d)
			var gotDW []float32
			gotDX := deterministic(t, "rmsnorm_backward", func() []float32 {
				ddx, ddw := cudatest.Upload(t, rt, dx0), cudatest.Upload(t, rt, dw0)
				cudatest.Must(t, kernels.RMSNormBackward(rt, ddx, 0, ddw, dDy, dX, dInv, dW, part, tc.n, tc.d))
				gotDW = devGet(t, rt, ddw, tc.d)
				return append(devGet(t, rt, ddx, tc.n*tc.d), gotDW...)
			})
			closeAll(t, "rmsnorm dx", gotDX[:tc.n*tc.d], dx, 2e-6, 1e-5)
			closeAll(t, "rmsnorm dw", gotDW, dw, 1e-5*math.Sqrt(float64(tc.n)), 1e-5)
			withBF16Copy(t, rt, "rmsnorm_backward dx", gotDX[:tc.n*tc.d], func(h cuda.Ptr) cuda.Ptr {
				ddx, ddw := cudatest.Upload(t, rt, dx0), cudatest.Upload(t, rt, dw0)
				cudatest.Must(t, kernels.RMSNormBackward(rt, ddx, h, ddw, dDy, dX, dInv, dW, part, tc.n, tc.d))
				return ddx
			})
		})
	}
}

func TestCUDARoPE(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(11, 3))
	for _, tc := range []struct{ n, heads, e, context int }{{1, 2, 32, 64}, {9, 3, 64, 64}, {40, 5, 128, 2048}} {
		t.Run(fmt.Sprintf("n=%d_heads=%d_E=%d", tc.n, tc.heads, tc.e), func(t *testing.T) {
			stride := (tc.heads + 1) * tc.e // a column of heads the rotation leaves alone
			x := devRand(rng, tc.n*stride, 1)
			pos := make([]int32, tc.n)
			for i := range pos {
				pos[i] = int32(rng.IntN(tc.context))
			}
			pos[0] = int32(tc.context - 1)
			cos, sin := twinRopeTable[float64](tc.context, tc.e, 10000)
			cos32, sin32 := twinRopeTable[float32](tc.context, tc.e, 10000)
			dCos, dSin, dPos := cudatest.Upload(t, rt, cos32), cudatest.Upload(t, rt, sin32), cudatest.Upload(t, rt, pos)
			for _, sign := range []float32{1, -1} {
				want := to64(x)
				twinRoPE(want, pos, stride, tc.heads, tc.e, cos, sin, float64(sign))
				got := deterministic(t, "rope", func() []float32 {
					dx := cudatest.Upload(t, rt, x)
					cudatest.Must(t, kernels.RoPE(rt, dx, dPos, dCos, dSin, tc.n, stride, tc.heads, tc.e, sign))
					return devGet(t, rt, dx, tc.n*stride)
				})
				closeAll(t, fmt.Sprintf("rope sign %v", sign), got, want, 1e-6, 1e-6)
			}
		})
	}
}

func TestCUDASwiGLU(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(11, 4))
	for _, tc := range []struct{ n, m int }{{1, 64}, {37, 192}, {5, 1536}} {
		t.Run(fmt.Sprintf("n=%d_m=%d", tc.n, tc.m), func(t *testing.T) {
			gu, dact := devRand(rng, tc.n*2*tc.m, 2), devRand(rng, tc.n*tc.m, 1)
			act, sig, dgu := make([]float64, tc.n*tc.m), make([]float64, tc.n*tc.m), make([]float64, tc.n*2*tc.m)
			twinSwiGLU(act, sig, to64(gu), tc.m)
			twinSwiGLUBackward(dgu, to64(dact), to64(gu), sig, tc.m)
			dGu, dDact := cudatest.Upload(t, rt, gu), cudatest.Upload(t, rt, dact)
			dSig := devOut(t, rt, tc.n*tc.m)
			got := deterministic(t, "swiglu", func() []float32 {
				out := devOut(t, rt, tc.n*tc.m)
				cudatest.Must(t, kernels.SwiGLU(rt, out, 0, dSig, dGu, tc.n, tc.m))
				return devGet(t, rt, out, tc.n*tc.m)
			})
			closeAll(t, "swiglu act", got, act, 1e-6, 1e-5)
			closeAll(t, "swiglu sig", devGet(t, rt, dSig, tc.n*tc.m), sig, 1e-7, 1e-5)
			gotD := deterministic(t, "swiglu_backward", func() []float32 {
				out := devOut(t, rt, tc.n*2*tc.m)
				cudatest.Must(t, kernels.SwiGLUBackward(rt, out, 0, dDact, dGu, dSig, tc.n, tc.m))
				return devGet(t, rt, out, tc.n*2*tc.m)
			})
			closeAll(t, "swiglu dgu", gotD, dgu, 1e-6, 1e-5)
			withBF16Copy(t, rt, "swiglu act", got, func(h cuda.Ptr) cuda.Ptr {
				out := devOut(t, rt, tc.n*tc.m)
				cudatest.Must(t, kernels.SwiGLU(rt, out, h, dSig, dGu, tc.n, tc.m))
				return out
			})
			withBF16Copy(t, rt, "swiglu_backward dgu", gotD, func(h cuda.Ptr) cuda.Ptr {
				out := devOut(t, rt, tc.n*2*tc.m)
				cudatest.Must(t, kernels.SwiGLUBackward(rt, out, h, dDact, dGu, dSig, tc.n, tc.m))
				return out
			})
			noSig := devOut(t, rt, tc.n*tc.m) // scoring keeps no sigmoid
			cudatest.Must(t, kernels.SwiGLU(rt, noSig, 0, 0, dGu, tc.n, tc.m))
			closeAll(t, "swiglu act without sig", devGet(t, rt, noSig, tc.n*tc.m), act, 1e-6, 1e-5)
		})
	}
}

func TestCUDARows(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(11, 5))
	const n, d = 50, 24
	rows := []int32{0, 3, 4, 17, 49}
	src := devRand(rng, n*d, 1)
	want := make([]float32, len(rows)*d)
	twinGatherRows(want, src, rows, d)
	dSrc, dRows := cudatest.Upload(t, rt, src), cudatest.Upload(t, rt, rows)
	out := devOut(t, rt, len(rows)*d)
	cudatest.Must(t, kernels.GatherRows(rt, out, dSrc, dRows, len(rows), d))
	sameBits(t, "gather_rows", devGet(t, rt, out, len(rows)*d), want)

	x := make([]float32, n*d) // scatterRows works in place on the first rows
	copy(x, want)
	twinScatterRows(x, len(rows), rows, d, n)
	dst := devOut(t, rt, n*d)
	cudatest.Must(t, rt.Memset(dst, 0, 4*n*d))
	cudatest.Must(t, kernels.ScatterRows(rt, dst, out, dRows, len(rows), d))
	sameBits(t, "scatter_rows", devGet(t, rt, dst, n*d), x)

	y, a := devRand(rng, 1000, 1), devRand(rng, 1000, 1)
	sum := make([]float32, len(y))
	for i := range y {
		sum[i] = y[i] + a[i]
	}
	dY := cudatest.Upload(t, rt, y)
	cudatest.Must(t, kernels.AddInPlace(rt, dY, cudatest.Upload(t, rt, a), len(y)))
	sameBits(t, "add_inplace", devGet(t, rt, dY, len(y)), sum)
}

func TestCUDALogSoftmaxEntropy(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(11, 6))
	for _, tc := range []struct {
		v    int
		rows []int32 // of n = rows[last]+1: the need rows, compacted on the device
		temp float64
	}{{98, []int32{0}, 1}, {98, []int32{1, 3, 4}, 0.7}, {49152, []int32{0, 2, 5, 6, 7}, 1}, {49152, []int32{3}, 1.3}} {
		t.Run(fmt.Sprintf("V=%d_k=%d_T=%v", tc.v, len(tc.rows), tc.temp), func(t *testing.T) {
			runLogSoftmaxEntropy(t, rt, rng, tc.v, tc.rows, tc.temp)
		})
	}
}

func runLogSoftmaxEntropy(t *testing.T, rt cuda.Runtime, rng *rand.Rand, v int, rows []int32, temp float64) {
	k, n := len(rows), int(rows[len(rows)-1])+1
	logits := devRand(rng, k*v, 3)
	logits[k*v-1] = 40 // a near one-hot row: its entropy is tiny, its other probabilities underflow
	targets, compact := make([]int32, n), make([]int32, k)
	dlp, dH := make([]float64, n), make([]float64, n)
	dlpK, dHK := make([]float32, k), make([]float32, k)
	for i, r := range rows {
		targets[r] = int32(rng.IntN(v))
		compact[i] = targets[r]
		dlp[r], dH[r] = float64(float32(rng.NormFloat64())), float64(float32(rng.NormFloat64()))
		if i == 0 && k > 1 {
			dlp[r], dH[r] = 0, 0 // a row no loss reads: zeros
		}
		dlpK[i], dHK[i] = float32(dlp[r]), float32(dH[r])
	}
	logp, ent, dlogits := make([]float64, n*v), make([]float64, n), make([]float64, k*v)
	twinLogSoftmaxEntropy(logp, ent, to64(logits), rows, v, temp)
	twinLogSoftmaxEntropyBackward(dlogits, logp, ent, targets, dlp, dH, rows, v, temp)
	wantLogp, wantEnt := make([]float64, k), make([]float64, k)
	for i, r := range rows {
		wantLogp[i], wantEnt[i] = logp[int(r)*v+int(targets[r])], ent[r]
	}

	inv := float32(1 / temp)
	dLogits, dTargets := cudatest.Upload(t, rt, logits), cudatest.Upload(t, rt, compact)
	dLogp, dEnt, dMax, dLse := devOut(t, rt, k), devOut(t, rt, k), devOut(t, rt, k), devOut(t, rt, k)
	got := deterministic(t, "logsoftmax_entropy", func() []float32 {
		cudatest.Must(t, kernels.LogSoftmaxEntropy(rt, dLogp, dEnt, dMax, dLse, dLogits, dTargets, k, v, inv))
		return append(devGet(t, rt, dLogp, k), devGet(t, rt, dEnt, k)...)
	})
	atol := 2e-6 * math.Log(float64(v)) / temp
	closeAll(t, "target log-prob", got[:k], wantLogp, atol, 2e-6)
	closeAll(t, "entropy", got[k:], wantEnt, atol, 2e-6)
	dDlp, dDH := cudatest.Upload(t, rt, dlpK), cudatest.Upload(t, rt, dHK)
	gotD := deterministic(t, "logsoftmax_entropy_backward", func() []float32 {
		over := cudatest.Upload(t, rt, logits) // the gradient overwrites the logits
		cudatest.Must(t, kernels.LogSoftmaxEntropyBackward(rt, over, 0, over, dMax, dLse, dEnt, dTargets, dDlp, dDH, k, v, inv))
		return devGet(t, rt, over, k*v)
	})
	closeAll(t, "dlogits", gotD, dlogits, 2e-6/temp, 1e-4)
	withBF16Copy(t, rt, "dlogits", gotD, func(h cuda.Ptr) cuda.Ptr {
		over := cudatest.Upload(t, rt, logits)
		cudatest.Must(t, kernels.LogSoftmaxEntropyBackward(rt, over, h, over, dMax, dLse, dEnt, dTargets, dDlp, dDH, k, v, inv))
		return over
	})
}
