package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// logProbs returns need row r's log-probs over the whole vocabulary after
// a forward pass at temperature temp: its logits computed again from the
// final norm's output, less the normaliser the tail kept, as the backward
// pass computes them.
func logProbs[F Float](n *net[F], a *acts[F], r int, temp float64) []float64 {
	k, ok := slices.BinarySearch(a.rows, int32(r))
	if !ok {
		panic(fmt.Sprintf("row %d is not a need row", r))
	}
	D, V := n.cfg.Hidden, n.cfg.Vocab
	z := make([]F, V)
	n.mm.NT(z, a.xf[k*D:(k+1)*D], n.w.head, 1, D, V, false)
	inv, out := F(1/temp), make([]float64, V)
	for v, x := range z {
		out[v] = float64((x-a.zmax[r])*inv - a.lse[r])
	}
	return out
}

// fullTail is the tail's oracle, one row at a time in float64 with the
// whole [K, V] logits at hand: the final norm of x ([K, D]), logits =
// xf·headᵀ, log_softmax at temp, each row's target log-prob and entropy;
// and from the upstream gradients dlp, dH, the gradients wrt x, the norm's
// weight and lm_head.
type fullTail struct {
	lp, ent, dx, dnorm, dhead []float64
}

func newFullTail(x, norm, head []float64, d, v int, eps, temp float64, targets []int32, dlp, dH []float64) fullTail {
	k := len(x) / d
	f := fullTail{lp: make([]float64, k), ent: make([]float64, k), dx: make([]float64, k*d), dnorm: make([]float64, d), dhead: make([]float64, v*d)}
	for r := 0; r < k; r++ {
		xr := x[r*d : (r+1)*d]
		xf := rmsnormNaive(xr, norm, eps)
		z := make([]float64, v)
		for j := range z {
			z[j] = dot(xf, head[j*d:(j+1)*d]) / temp
		}
		m := slices.Max(z)
		var sum float64
		for _, zj := range z {
			sum += math.Exp(zj - m)
		}
		c := m + math.Log(sum)
		p := make([]float64, v)
		for j, zj := range z {
			p[j] = math.Exp(zj - c)
			f.ent[r] -= p[j] * (zj - c)
		}
		f.lp[r] = z[targets[r]] - c
		dxf := make([]float64, d)
		for j, zj := range z {
			dz := (-dlp[r]*p[j] - dH[r]*p[j]*(zj-c+f.ent[r])) / temp
			if j == int(targets[r]) {
				dz += dlp[r] / temp
			}
			for i := range dxf {
				f.dhead[j*d+i] += dz * xf[i]
				dxf[i] += dz * head[j*d+i]
			}
		}
		// xf = x·s·w with s = (mean x² + eps)^(−1/2): dw = dxf·x·s,
		// dx = s·(dxf·w) − s³·x·Σ(dxf·w·x)/d
		s := 1 / math.Sqrt(dot(xr, xr)/float64(d)+eps)
		var gx float64
		for i := range xr {
			f.dnorm[i] += dxf[i] * xr[i] * s
			gx += dxf[i] * norm[i] * xr[i]
		}
		for i := range xr {
			f.dx[r*d+i] = s*dxf[i]*norm[i] - s*s*s*xr[i]*gx/float64(d)
		}
	}
	return f
}

// worstRel is the largest |got − want| relative to max(1, the largest |want|).
func worstRel[F Float](got []F, want []float64) float64 {
	worst, scale := 0.0, 1.0
	for i, w := range want {
		worst, scale = max(worst, math.Abs(float64(got[i])-w)), max(scale, math.Abs(w))
	}
	return worst / scale
}

// TestTailMatchesFull: the tail in blocks of need rows (several, the first
// ragged; one row; one block) gives, in float64, the target log-probs,
// entropies and gradients (lm_head, the final norm's weight, its input) of
// the whole [K, V] computation, at temperatures other than 1 too, on the
// presets' vocabulary and on Qwen3's 151,936 tokens.
func TestTailMatchesFull(t *testing.T) {
	for _, tc := range []struct {
		v, d, k, block int
		temp           float64
	}{
		{98, 16, 10, 3, 0.7},        // blocks of 1, 3, 3, 3
		{98, 16, 10, 10, 1},         // one block
		{98, 16, 1, 1, 1.6},         // one row
		{151936, 8, 5, 2, 0.8},      // a real vocabulary: blocks of 1, 2, 2
		{151936, 8, 3, 64, 1.0},     // a block larger than the rows
		{98, 32, 70, 32, 1.3},       // blocks of 6, 32, 32: logits split by vocabulary over two workers
		{98, 16, 300, 150, 1.1},     // blocks of 150 rows: logits split by rows
		{151936, 4, 1, 1, 0.000001}, // a near-greedy temperature
	} {
		name := fmt.Sprintf("V=%d K=%d block=%d T=%g", tc.v, tc.k, tc.block, tc.temp)
		cfg := Config{Vocab: tc.v, Hidden: tc.d, Layers: 1, Heads: 2, KVHeads: 2, MLP: 8, Context: 8, RopeTheta: 10000, NormEps: 1e-6}
		n := testNet(cfg, 31)
		a := newActs[float64](cfg, 1, tc.k, n.workers, true)
		a.block = min(tc.block, tc.k)
		rng := rand.New(rand.NewPCG(uint64(tc.k), 5))
		a.rows = a.rows[:0]
		for r := range tc.k {
			a.rows = append(a.rows, int32(r))
			a.targets[r] = int32(rng.IntN(tc.v))
			a.dlp[r], a.dH[r] = rng.NormFloat64(), rng.NormFloat64()
		}
		x := a.resid[1][:tc.k*tc.d]
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		want := newFullTail(x, n.w.norm, n.w.head, tc.d, tc.v, cfg.NormEps, tc.temp, a.targets, a.dlp, a.dH)
		n.tailForward(a, tc.temp)
		g := bindParams(cfg, make([]float64, len(n.w.flat)))
		n.tailBackward(a, g, tc.temp)
		for _, c := range []struct {
			what string
			got  []float64
			want []float64
		}{
			{"log-probs", a.lp[:tc.k], want.lp}, {"entropies", a.ent[:tc.k], want.ent},
			{"dx", a.dx[:tc.k*tc.d], want.dx}, {"d norm", g.norm, want.dnorm}, {"d lm_head", g.head, want.dhead},
		} {
			if e := worstRel(c.got, c.want); e > 1e-12 {
				t.Errorf("%s: %s differ from the full tail's by %.3g (want ≤ 1e-12)", name, c.what, e)
			}
		}
	}
}

// TestTailBlocksMatchOneBlock: a whole model's forward and backward with
// its tail in blocks of 3 and of 1 need rows against one block: in
// float64 to 1e-12 (outputs and every gradient); in float32 the outputs
// are bit-identical (a row's logits do not depend on the other rows of
// its product) and the gradients differ only by the summation order of
// lm_head's over the blocks.
func TestTailBlocksMatchOneBlock(t *testing.T) {
	wide := Config{Vocab: 98, Hidden: 64, Layers: 2, Heads: 2, KVHeads: 1, MLP: 100, Context: 40, RopeTheta: 10000, NormEps: 1e-6}
	seqs := longGroupedSeqs(wide.Vocab)
	n64 := testNet(wide, 17)
	w32 := make([]float32, len(n64.w.flat))
	for i, v := range n64.w.flat {
		w32[i] = float32(v)
	}
	n32 := newNet(wide, w32, 2)
	n32.pack(true)
	run64 := func(block int) (out, grad []float64) { return runBlocks(n64, seqs, block) }
	run32 := func(block int) (out, grad []float64) { return runBlocks(n32, seqs, block) }
	out64, grad64 := run64(0)
	out32, grad32 := run32(0)
	for _, block := range []int{3, 1} {
		o, g := run64(block)
		if e, eg := worstRel(o, out64), worstRel(g, grad64); e > 1e-12 || eg > 1e-12 {
			t.Errorf("float64, blocks of %d: outputs differ by %.3g, gradients by %.3g (want ≤ 1e-12)", block, e, eg)
		}
		o, g = run32(block)
		e, eg := worstRel(o, out32), worstRel(g, grad32)
		t.Logf("float32, blocks of %d: outputs differ by %.3g, gradients by %.3g of the largest", block, e, eg)
		if (e != 0 && n32.pk != nil) || e > 1e-6 || eg > 1e-6 {
			t.Errorf("float32, blocks of %d: outputs differ by %.3g (packed %v: want 0), gradients by %.3g (want ≤ 1e-6)", block, e, n32.pk != nil, eg)
		}
	}
}

// runBlocks runs n forward and backward over seqs with its tail in blocks
// of block need rows (0: the workspace's own) and random upstream
// gradients, and returns the log-probs and entropies, and the gradients.
func runBlocks[F Float](n *net[F], seqs []Sequence, block int) (out, grad []float64) {
	a := newActs[F](n.cfg, len(seqs), paddedLen(n.cfg, seqs), n.workers, true)
	a.load(seqs, true)
	if block > 0 {
		a.block = block
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for r := range a.N {
		if a.need[r] {
			a.dlp[r], a.dH[r] = rng.NormFloat64(), rng.NormFloat64()
		}
	}
	n.forward(a, 0.9)
	g := make([]F, len(n.w.flat))
	n.backward(a, bindParams(n.cfg, g), 0.9)
	for _, r := range a.rows {
		out = append(out, float64(a.lp[r]), float64(a.ent[r]))
	}
	for _, x := range g {
		grad = append(grad, float64(x))
	}
	return out, grad
}

// TestSoftmaxRowFloat32: in float32 a row's entropy and target log-prob
// stay within float32 rounding of float64's over Qwen3's 151,936 tokens
// as over 98 (an entropy summed in float32 drifted by up to 1e-3 there).
func TestSoftmaxRowFloat32(t *testing.T) {
	for _, v := range []int{98, 151936} {
		for _, sd := range []float64{1, 3, 8} {
			rng := rand.New(rand.NewPCG(1, uint64(v)))
			z32, z64 := make([]float32, v), make([]float64, v)
			for i := range z32 {
				z32[i] = float32(sd * rng.NormFloat64())
				z64[i] = float64(z32[i])
			}
			for _, temp := range []float64{1, 0.6} {
				lp32, h32, _, _ := softmaxRow(z32, make([]float32, v), 5, float32(1/temp))
				lp64, h64, _, _ := softmaxRow(z64, make([]float64, v), 5, 1/temp)
				dh, dlp := math.Abs(float64(h32)-h64)/max(1, h64), math.Abs(float64(lp32)-lp64)/max(1, -lp64)
				if dh > 1e-6 || dlp > 1e-6 {
					t.Errorf("V %d, logits' sd %g, T %g: float32 entropy off by %.3g, log-prob by %.3g (relative; want ≤ 1e-6)", v, sd, temp, dh, dlp)
				}
			}
		}
	}
}
