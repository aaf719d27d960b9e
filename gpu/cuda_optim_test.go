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
	"github.com/mgrpo/mgrpo/gpu/optim"
)

// The optimiser's kernels against gpu/optim over a flat buffer cut into
// tensors, some of them norm weights (no decay).

// flatParams cuts w, g into optim.Params at the offsets cuts (the segments
// alternate decay, no decay, decay, ...) and returns the no-decay ranges
// as the kernels take them.
func flatParams(w, g []float32, cuts []int) (params []optim.Param, nodecay []int64) {
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := cuts[i], cuts[i+1]
		p := optim.Param{Name: fmt.Sprint("t", i), W: w[lo:hi], G: g[lo:hi], NoDecay: i%2 == 1}
		if p.NoDecay {
			nodecay = append(nodecay, int64(lo), int64(hi))
		}
		params = append(params, p)
	}
	return params, nodecay
}

func TestCUDAAdamW(t *testing.T) {
	rt := cudatest.Open(t)
	for _, n := range []int{1, 1000, 100003} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) { runAdamW(t, rt, n) })
	}
}

func runAdamW(t *testing.T, rt cuda.Runtime, n int) {
	rng := rand.New(rand.NewPCG(12, uint64(n)))
	cuts := []int{0, n / 3, n/3 + min(n/7, 64), n/2 + 1, n/2 + 1 + min(n/9, 64), n}
	w := devRand(rng, n, 0.02)
	o, err := optim.NewAdamW(1e-3, 0.9, 0.999, 1e-8, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	dW := cudatest.Upload(t, rt, w)
	dM, dV := devOut(t, rt, n), devOut(t, rt, n)
	cudatest.Must(t, rt.Memset(dM, 0, int64(4*n)))
	cudatest.Must(t, rt.Memset(dV, 0, int64(4*n)))
	out, part := cudatest.Alloc[float64](t, rt, 3), cudatest.Alloc[float64](t, rt, 3*kernels.ReduceParts)
	for step := 1; step <= 3; step++ {
		lr := 1e-3 * float64(step)
		g := devRand(rng, n, 1)
		params, nodecay := flatParams(w, g, cuts)
		dG, dRanges := cudatest.Upload(t, rt, g), cudatest.Upload(t, rt, append(nodecay, 0))
		k := o.Coeffs(step, lr)
		u, err := o.Preview(params, lr)
		if err != nil {
			t.Fatal(err)
		}
		cudatest.Must(t, kernels.AdamWPreview(rt, out, part, dW, dG, dM, dV, int64(n), dRanges, len(nodecay)/2, &k))
		pv := cudatest.Download[float64](t, rt, out, 3)
		if d := math.Abs(math.Sqrt(pv[0]) - u.Norm); d > 1e-12*u.Norm || pv[2] != -1 {
			t.Errorf("step %d: preview update norm %v (bad %v), optim's %v", step, math.Sqrt(pv[0]), pv[2], u.Norm)
		}
		if d := math.Abs(math.Sqrt(pv[1]) - u.WeightNorm); d > 1e-12*u.WeightNorm {
			t.Errorf("step %d: preview weight norm %v, optim's %v", step, math.Sqrt(pv[1]), u.WeightNorm)
		}
		o.Step(params, lr) // w, on the host, is now the CPU's result
		cudatest.Must(t, kernels.AdamW(rt, dW, dG, dM, dV, int64(n), dRanges, len(nodecay)/2, &k))
		sameBits(t, fmt.Sprintf("step %d weights", step), devGet(t, rt, dW, n), w)
	}
	g := devRand(rng, n, 1)
	g[n-1] = float32(math.Inf(1))
	k := o.Coeffs(4, 1e-3)
	cudatest.Must(t, kernels.AdamWPreview(rt, out, part, dW, cudatest.Upload(t, rt, g), dM, dV, int64(n), cudatest.Upload(t, rt, []int64{0}), 0, &k))
	if bad := cudatest.Download[float64](t, rt, out, 3)[2]; bad != float64(n-1) {
		t.Errorf("preview with an infinite gradient at %d: first bad element %v", n-1, bad)
	}
}

func TestCUDAGradNormAndClip(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(12, 1))
	for _, tc := range []struct {
		n       int
		maxNorm float64
		inf     bool
	}{{1, 1, false}, {5000, 1, false}, {300001, 1e4, false}, {777, 0, false}, {1000, 1, true}} {
		t.Run(fmt.Sprintf("n=%d_max=%v_inf=%v", tc.n, tc.maxNorm, tc.inf), func(t *testing.T) {
			g := devRand(rng, tc.n, 0.1)
			if tc.inf {
				g[tc.n/2] = float32(math.Inf(-1))
			}
			dG := cudatest.Upload(t, rt, g)
			params, _ := flatParams(make([]float32, tc.n), g, []int{0, tc.n / 2, tc.n})
			norm := optim.ClipGlobalNorm(params, tc.maxNorm, 1)
			sumsq, part := cudatest.Alloc[float64](t, rt, 1), cudatest.Alloc[float64](t, rt, kernels.ReduceParts)
			got := deterministic(t, "sum of squares", func() []float64 {
				cudatest.Must(t, kernels.SumSquares(rt, sumsq, part, dG, int64(tc.n)))
				return cudatest.Download[float64](t, rt, sumsq, 1)
			})
			gotNorm := math.Sqrt(got[0])
			if !(math.Abs(gotNorm-norm) <= 1e-6*norm) && !(tc.inf && math.IsInf(gotNorm, 1)) {
				t.Errorf("norm %v, optim's %v", gotNorm, norm)
			}
			cudatest.Must(t, kernels.ClipScale(rt, dG, int64(tc.n), sumsq, tc.maxNorm))
			if tc.inf { // not clipped: the caller skips the step
				sameBits(t, "unclipped gradient", devGet(t, rt, dG, tc.n), g)
			} else {
				closeAll(t, "clipped gradient", devGet(t, rt, dG, tc.n), to64(g), 0, 1e-7)
			}

			bad, badPart := cudatest.Alloc[int64](t, rt, 1), cudatest.Alloc[int64](t, rt, kernels.ReduceParts)
			cudatest.Must(t, kernels.FirstNonFinite(rt, bad, badPart, dG, int64(tc.n)))
			want := int64(-1)
			if tc.inf {
				want = int64(tc.n / 2)
			}
			if got := cudatest.Download[int64](t, rt, bad, 1)[0]; got != want {
				t.Errorf("first non-finite = %d, want %d", got, want)
			}
		})
	}
}
