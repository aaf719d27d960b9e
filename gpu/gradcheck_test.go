package gpu

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Finite-difference checks of every kernel and of the whole model, in
// float64 (the same generic code the float32 model runs). Each check builds a
// scalar loss L = Σ r·y with random coefficients r, runs the kernel's
// backward with dy = r, and compares every input gradient with the
// fourth-order central difference
//
//	(−L(x+2h) + 8·L(x+h) − 8·L(x−h) + L(x−2h)) / 12h,
//
// whose truncation error O(h⁴) is far below the tolerance.

const (
	fdStep   = 1e-4
	fdMaxErr = 1e-6 // required worst relative error (task brief)
)

func randVec(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	return v
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// relErr is |a − n| / max(|a|, |n|, floor): relative for gradients of
// normal size, absolute (scaled by 1/floor) for gradients near zero, where a
// relative error of central differences means nothing.
func relErr(a, n float64) float64 {
	return math.Abs(a-n) / math.Max(math.Max(math.Abs(a), math.Abs(n)), 1e-3)
}

// checkGrad perturbs x[i] for the chosen indices (all when idx is nil) and
// returns the worst relative error between analytic[i] and the central
// difference of loss.
func checkGrad(t *testing.T, name string, x, analytic []float64, idx []int, loss func() float64) float64 {
	t.Helper()
	if idx == nil {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	}
	worst := 0.0
	for _, i := range idx {
		old := x[i]
		at := func(k float64) float64 { x[i] = old + k*fdStep; return loss() }
		num := (-at(2) + 8*at(1) - 8*at(-1) + at(-2)) / (12 * fdStep)
		x[i] = old
		if e := relErr(analytic[i], num); e > worst {
			worst = e
			if e > fdMaxErr {
				t.Errorf("%s[%d]: analytic %.10g, numeric %.10g, rel err %.3g", name, i, analytic[i], num, e)
			}
		}
	}
	t.Logf("%s: worst relative error %.3g over %d elements", name, worst, len(idx))
	return worst
}

func TestGradEmbedding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	v, d := 5, 3
	table := randVec(rng, v*d, 1)
	tokens := []int32{0, 3, 3, 4, 0, 1} // repeats must accumulate
	r := randVec(rng, len(tokens)*d, 1)
	y := make([]float64, len(tokens)*d)
	loss := func() float64 { embed(y, table, tokens, d); return dot(r, y) }
	g := make([]float64, len(table))
	embedBackward(g, r, tokens, d)
	checkGrad(t, "embed.table", table, g, nil, loss)
}

func TestGradRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 1))
	n, d := 4, 6
	x, w, r := randVec(rng, n*d, 1), randVec(rng, d, 1), randVec(rng, n*d, 1)
	y, inv := make([]float64, n*d), make([]float64, n)
	loss := func() float64 { rmsnorm(y, inv, x, w, d, 1e-6, 2); return dot(r, y) }
	loss()
	dx, dw := make([]float64, n*d), make([]float64, d)
	rmsnormBackward(dx, dw, r, x, inv, w, d, 2)
	checkGrad(t, "rmsnorm.x", x, dx, nil, loss)
	checkGrad(t, "rmsnorm.w", w, dw, nil, loss)
}

func TestGradMatmul(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	n, in, out := 70, 4, 40 // above minRowsPerWorker: the split paths run
	x, w, r := randVec(rng, n*in, 1), randVec(rng, out*in, 1), randVec(rng, n*out, 1)
	y := make([]float64, n*out)
	loss := func() float64 { matmulNT(y, x, w, n, in, out, false, 2); return dot(r, y) }
	dx, dw := make([]float64, n*in), make([]float64, out*in)
	matmulNN(dx, r, w, n, in, out, false, 2)
	matmulTNAdd(dw, r, x, n, in, out, 2)
	checkGrad(t, "matmul.x", x, dx, nil, loss)
	checkGrad(t, "matmul.w", w, dw, nil, loss)
}

func TestGradRoPE(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	n, heads, e, extra := 6, 3, 4, 5
	stride := heads*e + extra // rope must leave the v columns alone
	cos, sin := ropeTable[float64](n, e, 10000, RopeScaling{})
	pos := []int32{0, 1, 2, 3, 4, 5}
	x, r := randVec(rng, n*stride, 1), randVec(rng, n*stride, 1)
	y := make([]float64, len(x))
	loss := func() float64 { copy(y, x); rope(y, pos, stride, heads, e, cos, sin, 1, 2); return dot(r, y) }
	dx := append([]float64(nil), r...)
	rope(dx, pos, stride, heads, e, cos, sin, -1, 2)
	checkGrad(t, "rope.x", x, dx, nil, loss)
}

func TestGradAttention(t *testing.T) {
	for _, s := range []attnShape{
		{B: 2, T: 4, H: 2, G: 2, E: 3},                                 // multi-head
		{B: 2, T: 5, H: 4, G: 2, E: 2},                                 // grouped KV heads (GQA)
		{B: 1, T: 3, H: 3, G: 1, E: 4},                                 // multi-query
		{B: 4, T: 5, H: 2, G: 1, E: 3, start: []int32{0, 5, 7, 7, 10}}, // packed: 5, 2, 0 and 3 rows
		// a group: the last two read the first's 3 leading keys and values
		{B: 3, T: 5, H: 2, G: 1, E: 3, start: []int32{0, 5, 7, 9}, pre: []int32{0, 3, 3}, from: []int32{0, 0, 0}},
	} {
		rng := rand.New(rand.NewPCG(5, uint64(s.H*10+s.G)))
		n := s.B * s.T
		if s.start != nil {
			n = int(s.start[s.B])
		}
		qkv, r := randVec(rng, n*s.stride(), 1), randVec(rng, n*s.H*s.E, 1)
		att, probs := make([]float64, n*s.H*s.E), make([]float64, s.B*s.H*s.T*s.T)
		loss := func() float64 { attention(att, probs, qkv, s, nil, 2); return dot(r, att) }
		loss()
		dqkv, scratch := make([]float64, len(qkv)), make([]float64, 2*s.T*s.T)
		attentionBackward(dqkv, r, qkv, probs, scratch, s, nil, 2)
		checkGrad(t, "attention.qkv", qkv, dqkv, nil, loss)
	}
}

func TestGradSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	n, m := 3, 5
	gu, r := randVec(rng, n*2*m, 2), randVec(rng, n*m, 1)
	y, sig := make([]float64, n*m), make([]float64, n*m)
	loss := func() float64 { swiglu(y, sig, gu, m, 2); return dot(r, y) }
	loss()
	dgu := make([]float64, len(gu))
	swigluBackward(dgu, r, gu, sig, m, 2)
	checkGrad(t, "swiglu.gu", gu, dgu, nil, loss)
}

func TestGradLogSoftmaxEntropy(t *testing.T) {
	for _, temp := range []float64{1, 0.7, 1.6} {
		rng := rand.New(rand.NewPCG(7, 1))
		n, v := 4, 7
		logits := randVec(rng, n*v, 3)
		target := []int32{0, 6, 3, 3}
		a, b := randVec(rng, n, 1), randVec(rng, n, 1)
		a[2] = 0 // a row with an entropy gradient only
		tl := newTail[float64](Config{Vocab: v}, n, 2, 1)
		rows := []int32{0, 1, 2, 3}
		loss := func() float64 {
			logSoftmaxEntropy(&tl, logits, rows, target, v, temp, 2)
			var s float64
			for r := 0; r < n; r++ {
				s += a[r]*tl.lp[r] + b[r]*tl.ent[r]
			}
			return s
		}
		loss()
		dz := slices.Clone(logits) // turned into their gradients in place
		logSoftmaxEntropyBackward(&tl, dz, rows, target, a, b, v, temp, 2)
		checkGrad(t, "logsoftmax+entropy.logits", logits, dz, nil, loss)
	}
}

// testNet builds a float64 decoder with random weights, norm weights drawn
// around 1 and biases around 0 so that their gradients are checked at a
// generic point.
func testNet(c Config, seed uint64) *net[float64] {
	flat := make([]float64, newLayout(c).size)
	initWeights(flat, c, seed)
	rng := rand.New(rand.NewPCG(seed, 99))
	for _, s := range newLayout(c).specs {
		w := flat[s.Offset : s.Offset+s.Size()]
		for i := range w {
			switch {
			case s.Norm:
				w[i] = 1 + 0.3*rng.NormFloat64()
			case s.Bias:
				w[i] = 0.2 * rng.NormFloat64()
			default:
				w[i] *= 10 // 0.2 std: larger activations exercise the nonlinearities
			}
		}
	}
	return newNet(c, flat, 2)
}

// testBatch fills a workspace with random tokens: sequence b has length
// lens[b] ≤ T (PAD after), per-row coefficients on log-prob and entropy on
// the rows whose next token lies inside the sequence.
func testBatch(n *net[float64], lens []int, t int, seed uint64) *acts[float64] {
	rng := rand.New(rand.NewPCG(seed, 7))
	a := newActs[float64](n.cfg, len(lens), t, n.workers, true)
	for b, l := range lens {
		for p := 0; p < t; p++ {
			r := b*t + p
			if p < l {
				a.tokens[r] = int32(3 + rng.IntN(n.cfg.Vocab-3))
			}
			if p >= 1 && p < l {
				a.targets[r-1] = a.tokens[r]
				a.dlp[r-1], a.dH[r-1] = rng.NormFloat64(), rng.NormFloat64()
				a.need[r-1] = true
			}
		}
	}
	return a
}

// packedBatch loads seqs into a packed workspace with random per-row
// coefficients on the log-prob and entropy of each completion token.
func packedBatch(n *net[float64], seqs []Sequence, seed uint64) *acts[float64] {
	rng := rand.New(rand.NewPCG(seed, 7))
	a := newActs[float64](n.cfg, len(seqs), paddedLen(n.cfg, seqs), n.workers, true)
	a.load(seqs, true)
	for r := range a.N {
		if a.need[r] {
			a.dlp[r], a.dH[r] = rng.NormFloat64(), rng.NormFloat64()
		}
	}
	return a
}

func modelLoss(n *net[float64], a *acts[float64], temp float64) float64 {
	n.forward(a, temp)
	var s float64
	for r := range a.tokens {
		s += a.dlp[r]*a.lp[r] + a.dH[r]*a.ent[r]
	}
	return s
}

func TestGradModel(t *testing.T) {
	tiny, _ := Preset("tiny")
	tied := tiny
	tied.TieEmbeddings = true
	gqa := Config{Vocab: 11, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 24, Context: 8, RopeTheta: 10000, NormEps: 1e-6}
	qwen2, qwen3, llama3 := gqa, gqa, gqa
	qwen2.Arch = ArchQwen2
	qwen3.Arch, qwen3.HeadWidth = ArchQwen3, 6 // H·E = 24 ≠ D = 16
	llama3.RopeScaling = RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 4}
	for _, tc := range []struct {
		name  string
		cfg   Config
		lens  []int                // a padded batch of these lengths (testBatch) ...
		t     int                  // ... and this width
		seqs  func(int) []Sequence // or these sequences, packed (packedBatch)
		temp  float64
		block int // need rows per block of the tail (0: the workspace's)
	}{
		{"tiny", tiny, []int{6, 4}, 6, nil, 1, 0},
		{"tiny tied T=0.7", tied, []int{5, 5, 3}, 5, nil, 0.7, 0},
		{"tiny tied, tail blocks of 2", tied, []int{5, 5, 3}, 5, nil, 0.7, 2},
		{"gqa", gqa, []int{8, 2}, 8, nil, 1.3, 0},
		{"gqa packed", gqa, nil, 0, packedSeqs, 1.1, 0},
		{"gqa grouped", gqa, nil, 0, groupedSeqs, 0.9, 0}, // groups share their prompts' rows
		{"gqa grouped, tail blocks of 3", gqa, nil, 0, groupedSeqs, 0.9, 3},
		{"qwen2 q/k/v biases", qwen2, []int{8, 5}, 8, nil, 1, 0},
		{"qwen2 grouped", qwen2, nil, 0, groupedSeqs, 0.8, 0},
		{"qwen3 q/k norms, head width 6", qwen3, []int{8, 3}, 8, nil, 1.2, 0},
		{"qwen3 grouped", qwen3, nil, 0, groupedSeqs, 0.9, 0},
		{"llama3 RoPE scaling", llama3, []int{8, 6}, 8, nil, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNet(tc.cfg, 11)
			var a *acts[float64]
			if tc.seqs != nil {
				a = packedBatch(n, tc.seqs(tc.cfg.Vocab), 3)
			} else {
				a = testBatch(n, tc.lens, tc.t, 3)
			}
			if tc.block > 0 {
				a.block = tc.block
			}
			modelLoss(n, a, tc.temp)
			grad := make([]float64, len(n.w.flat))
			n.backward(a, bindParams(tc.cfg, grad), tc.temp)
			rng := rand.New(rand.NewPCG(9, 9))
			worst := 0.0
			for _, s := range newLayout(tc.cfg).specs {
				idx := make([]int, 0, 24)
				for i := 0; i < 24; i++ {
					idx = append(idx, s.Offset+rng.IntN(s.Size()))
				}
				worst = max(worst, checkGrad(t, s.Name, n.w.flat, grad, idx, func() float64 { return modelLoss(n, a, tc.temp) }))
			}
			t.Logf("%s: worst relative error over all tensors %.3g", tc.name, worst)
		})
	}
}

// TestSwiGLUScratch: forward-only, with one scratch row of σ per worker,
// swiglu writes the same outputs as with every row's σ kept.
func TestSwiGLUScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 2))
	n, m := 37, 24
	gu := randVec(rng, n*2*m, 2)
	for _, workers := range []int{1, 3} {
		want, got := make([]float64, n*m), make([]float64, n*m)
		swiglu(want, make([]float64, n*m), gu, m, workers)
		swiglu(got, make([]float64, workers*m), gu, m, workers)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("workers %d: outputs with a scratch σ differ from those with every row's", workers)
		}
	}
}
