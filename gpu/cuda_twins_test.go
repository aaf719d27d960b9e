//go:build cuda || cudaemu

package gpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// The CPU twins of the CUDA kernels (gpu/cuda/kernels), each called in one
// place, so that a rename of a CPU kernel is a one-line fix here. They run
// single-threaded, in float32 (the CPU engine's bits) or float64 (the
// oracle).

func twinEmbed[F Float](dst, table []F, tokens []int32, d int) { embed(dst, table, tokens, d) }

func twinEmbedBackward[F Float](dTable, dy []F, tokens []int32, d int) {
	embedBackward(dTable, dy, tokens, d)
}

func twinRMSNorm[F Float](y, inv, x, w []F, d int, eps float64) { rmsnorm(y, inv, x, w, d, eps, 1) }

func twinRMSNormBackward[F Float](dx, dw, dy, x, inv, w []F, d int) {
	rmsnormBackward(dx, dw, dy, x, inv, w, d, 1)
}

func twinRopeTable[F Float](context, e int, theta float64) (cos, sin []F) {
	return ropeTable[F](context, e, theta, RopeScaling{})
}

func twinRoPE[F Float](x []F, pos []int32, stride, heads, e int, cos, sin []F, sign F) {
	rope(x, pos, stride, heads, e, cos, sin, sign, 1)
}

// twinProjectQKV is the q/k/v product of x ([rows, d]) with w ([qs, d])
// plus bias on every row.
func twinProjectQKV[F Float](qkv, x, w, bias []F, rows, d, qs int) {
	projectQKV(cpuLinear[F]{workers: 1}, qkv, x, layerParams[F]{qkv: w, qkvBias: bias}, rows, d, qs)
}

func twinBiasBackward[F Float](db, dy []F, rows int) {
	ones := make([]F, rows)
	for i := range ones {
		ones[i] = 1
	}
	biasBackward(db, dy, ones, rows)
}

func twinQKNorm[F Float](qkv, raw, inv, wq, wk []F, h, g, e, rows int, eps float64) {
	qkNorm(qkv, raw, inv, wq, wk, headShape{h, g, e}, rows, eps, 1)
}

func twinQKNormBackward[F Float](dqkv, dwq, dwk, raw, inv, wq, wk []F, h, g, e, rows int) {
	qkNormBackward(dqkv, dwq, dwk, raw, inv, wq, wk, make([]F, e), headShape{h, g, e}, rows, 1)
}

func twinSwiGLU[F Float](act, sig, gu []F, m int) { swiglu(act, sig, gu, m, 1) }

func twinSwiGLUBackward[F Float](dgu, dact, gu, sig []F, m int) {
	swigluBackward(dgu, dact, gu, sig, m, 1)
}

// twinLogSoftmaxEntropy writes each row's log-probs over the vocabulary
// (logp [n, v] at rows rows) and entropy from the tail's statistics.
func twinLogSoftmaxEntropy[F Float](logp, ent, logits []F, rows []int32, v int, temp float64) {
	tl := newTail[F](Config{Vocab: v}, len(ent), 1, 1)
	logSoftmaxEntropy(&tl, logits, rows, make([]int32, len(ent)), v, temp, 1)
	inv := F(1 / temp)
	for i, r := range rows {
		for j, z := range logits[i*v : (i+1)*v] {
			logp[int(r)*v+j] = (z-tl.zmax[r])*inv - tl.lse[r]
		}
		ent[r] = tl.ent[r]
	}
}

// twinLogSoftmaxEntropyBackward writes the gradient wrt rows rows' logits
// (compact) from their log-probs logp ([n, v]): the tail's backward on
// logits T·log p, whose maximum and normaliser are then 0.
func twinLogSoftmaxEntropyBackward[F Float](dlogits, logp, ent []F, targets []int32, dlp, dH []float64, rows []int32, v int, temp float64) {
	tl := newTail[F](Config{Vocab: v}, len(ent), 1, 1)
	copy(tl.ent, ent)
	for i, r := range rows {
		for j, l := range logp[int(r)*v : (int(r)+1)*v] {
			dlogits[i*v+j] = l * F(temp)
		}
	}
	logSoftmaxEntropyBackward(&tl, dlogits[:len(rows)*v], rows, targets, dlp, dH, v, temp, 1)
}

func twinGatherRows[F Float](dst, src []F, rows []int32, d int) { gatherRows(dst, src, rows, d) }

func twinScatterRows[F Float](x []F, k int, rows []int32, d, n int) { scatterRows(x, k, rows, d, n) }

// twinAttention runs attention and its backward on a copy of qkv, rotating
// with rot as the model does; it returns the output, the probabilities and
// the gradient wrt the unrotated qkv.
func twinAttention[F Float](qkv, datt []F, s attnShape, rot *rotation[F]) (att, probs, dqkv []F) {
	q := append([]F(nil), qkv...)
	att = make([]F, len(qkv)/s.stride()*s.H*s.E)
	probs = make([]F, s.B*s.H*s.T*s.T)
	attention(att, probs, q, s, rot, 1)
	dqkv = make([]F, len(qkv))
	attentionBackward(dqkv, datt, q, probs, make([]F, s.T*s.T), s, rot, 1)
	return att, probs, dqkv
}

// Helpers for the kernel tests.

// devRand returns n normal(0, scale) floats.
func devRand(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// closeAll fails the test at the first element where |got − want| >
// atol + rtol·|want| (NaN anywhere fails).
func closeAll(t *testing.T, what string, got []float32, want []float64, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); !(d <= atol+rtol*math.Abs(w)) {
			t.Fatalf("%s[%d] = %v, want %v (|diff| %.3g > %.3g + %.3g·|want|)", what, i, got[i], w, d, atol, rtol)
		}
	}
}

// sameBits fails the test unless got and want are identical bit for bit.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v bit for bit", what, i, got[i], want[i])
		}
	}
}

// deterministic runs run twice and fails unless both give the same bits
// (no float atomics, fixed reduction orders); it returns the first result.
func deterministic[T any](t *testing.T, what string, run func() []T) []T {
	t.Helper()
	a, b := run(), run()
	if !bytes.Equal(cuda.Bytes(a), cuda.Bytes(b)) {
		t.Fatalf("%s: a second run gives different bits", what)
	}
	return a
}

// withBF16Copy runs a kernel that writes the bf16 copy of its output into
// h (a fresh poisoned buffer of len(want) bf16s; run returns the fp32
// output) and fails unless the fp32 output is want, bit for bit, and the
// copy is what f32_to_bf16_kernel makes of it, element by element: the
// bits a bf16 product would have read after converting the output.
func withBF16Copy(t *testing.T, rt cuda.Runtime, what string, want []float32, run func(h cuda.Ptr) cuda.Ptr) {
	t.Helper()
	n := len(want)
	h, converted := cudatest.Alloc[uint16](t, rt, n), cudatest.Alloc[uint16](t, rt, n)
	out := run(h)
	sameBits(t, what+" beside its bf16 copy", devGet(t, rt, out, n), want)
	cudatest.Must(t, kernels.F32ToBF16(rt, converted, out, n))
	got, wantH := cudatest.Download[uint16](t, rt, h, n), cudatest.Download[uint16](t, rt, converted, n)
	for i := range wantH {
		if got[i] != wantH[i] {
			t.Fatalf("%s: bf16 copy [%d] = %#04x, want %#04x (f32_to_bf16 of %v)", what, i, got[i], wantH[i], want[i])
		}
	}
}

// devOut allocates n poisoned floats (see cudatest.Alloc).
func devOut(t *testing.T, rt cuda.Runtime, n int) cuda.Ptr { return cudatest.Alloc[float32](t, rt, n) }

func devGet(t *testing.T, rt cuda.Runtime, p cuda.Ptr, n int) []float32 {
	return cudatest.Download[float32](t, rt, p, n)
}

// twinLoad packs seqs into rows as the CPU engine does (acts.load, with
// shared prompts when share), for a model of h heads of width e, g of
// them key/value heads, and returns the attention shape and the positions.
func twinLoad(seqs []Sequence, t, h, g, e int, share bool) (attnShape, []int32) {
	c := Config{Vocab: 64, Hidden: h * e, Layers: 1, Heads: h, KVHeads: g, MLP: 8, Context: t}
	a := newActs[float32](c, len(seqs), t, 1, false)
	a.load(seqs, share)
	return attnShape{B: a.B, T: a.T, H: h, G: g, E: e, start: a.start, pre: a.pre, from: a.from}, a.pos[:a.N]
}

// twinDecode runs the decoder's cacheKV and attend for one layer whose
// cache is kc, vc (updated in place) on rows 0..r−1 of qkv, and returns
// the attention of outs (nil: every row).
func twinDecode[F Float](c Config, kc, vc, qkv []F, slot, pos []int32, tmax, r int, outs []int32) []F {
	d := &decoder[F]{n: &net[F]{cfg: c}, tmax: tmax, kc: [][]F{kc}, vc: [][]F{vc}, qkv: qkv, slot: slot, pos: pos,
		att: make([]F, r*c.Heads*c.HeadDim()), scores: make([]F, tmax)}
	d.cacheKV(0, r)
	d.attend(0, r, outs)
	return d.att
}

// twinDraw returns the CPU drawer's log-prob and entropy of z's token tok
// and the greedy token, and the tokens it may draw with their probability
// renormalised over them.
func twinDraw(z []float32, opt SampleOptions) (best int, lp []float64, entropy float64, cand map[int]float64) {
	dr := newDrawer(len(z), opt)
	best, entropy = softmax(dr, z)
	cand = map[int]float64{}
	var total float64
	for _, id := range dr.candidates() {
		total += dr.p[id]
	}
	for _, id := range dr.candidates() {
		cand[id] = dr.p[id] / total
	}
	return best, dr.lp, entropy, cand
}
