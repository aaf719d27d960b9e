package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The obvious, slow Llama forward pass (one sequence, one position at a
// time, Hugging Face formulas written out), against which the fused,
// batched kernels are tested.

type naiveWeights struct {
	c    Config
	flat []float64
	l    layout
}

// mat returns tensor name as rows [out][in].
func (w naiveWeights) mat(name string) [][]float64 {
	s := w.l.tensor(name)
	out, in := s.Shape[0], s.Shape[1]
	m := make([][]float64, out)
	for i := range m {
		m[i] = w.flat[s.Offset+i*in : s.Offset+(i+1)*in]
	}
	return m
}

func (w naiveWeights) vec(name string) []float64 {
	s := w.l.tensor(name)
	return w.flat[s.Offset : s.Offset+s.Size()]
}

func matVec(m [][]float64, x []float64) []float64 {
	y := make([]float64, len(m))
	for i, row := range m {
		for j, v := range row {
			y[i] += v * x[j]
		}
	}
	return y
}

func rmsnormNaive(x, w []float64, eps float64) []float64 {
	var ms float64
	for _, v := range x {
		ms += v * v
	}
	ms /= float64(len(x))
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] / math.Sqrt(ms+eps) * w[i]
	}
	return y
}

// ropeNaive is Hugging Face's q·cos + rotate_half(q)·sin for one head.
func ropeNaive(x []float64, pos int, theta float64) []float64 {
	e := len(x)
	cos, sin := make([]float64, e), make([]float64, e)
	for i := 0; i < e/2; i++ {
		a := float64(pos) / math.Pow(theta, float64(2*i)/float64(e))
		cos[i], cos[i+e/2] = math.Cos(a), math.Cos(a)
		sin[i], sin[i+e/2] = math.Sin(a), math.Sin(a)
	}
	rot := append(append([]float64{}, x[e/2:]...), x[:e/2]...)
	for i := 0; i < e/2; i++ {
		rot[i] = -rot[i]
	}
	y := make([]float64, e)
	for i := range x {
		y[i] = x[i]*cos[i] + rot[i]*sin[i]
	}
	return y
}

// attentionNaive: q[t][h], k[t][g], v[t][g] are per-head vectors; returns
// out[t] with the heads concatenated.
func attentionNaive(q, k, v [][][]float64, heads, kvHeads int) [][]float64 {
	out := make([][]float64, len(q))
	for t := range q {
		for h := 0; h < heads; h++ {
			g := h / (heads / kvHeads)
			e := len(q[t][h])
			scores := make([]float64, t+1)
			mx := math.Inf(-1)
			for s := 0; s <= t; s++ {
				for i := 0; i < e; i++ {
					scores[s] += q[t][h][i] * k[s][g][i]
				}
				scores[s] /= math.Sqrt(float64(e))
				mx = math.Max(mx, scores[s])
			}
			var z float64
			for s := range scores {
				scores[s] = math.Exp(scores[s] - mx)
				z += scores[s]
			}
			o := make([]float64, e)
			for s := range scores {
				for i := 0; i < e; i++ {
					o[i] += scores[s] / z * v[s][g][i]
				}
			}
			out[t] = append(out[t], o...)
		}
	}
	return out
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// forwardNaive returns, per position, log_softmax(logits/temp) and its entropy.
func forwardNaive(c Config, flat []float64, seq []int32, temp float64) ([][]float64, []float64) {
	w := naiveWeights{c: c, flat: flat, l: newLayout(c)}
	e := c.HeadDim()
	emb := w.mat("model.embed_tokens.weight")
	x := make([][]float64, len(seq))
	for t, tok := range seq {
		x[t] = append([]float64(nil), emb[tok]...)
	}
	split := func(v []float64, n int) [][]float64 {
		out := make([][]float64, n)
		for i := range out {
			out[i] = v[i*e : (i+1)*e]
		}
		return out
	}
	for l := 0; l < c.Layers; l++ {
		p := "model.layers." + itoa(l) + "."
		q, k, v := make([][][]float64, len(seq)), make([][][]float64, len(seq)), make([][][]float64, len(seq))
		for t := range seq {
			h := rmsnormNaive(x[t], w.vec(p+"input_layernorm.weight"), c.NormEps)
			q[t] = split(matVec(w.mat(p+"self_attn.q_proj.weight"), h), c.Heads)
			k[t] = split(matVec(w.mat(p+"self_attn.k_proj.weight"), h), c.KVHeads)
			v[t] = split(matVec(w.mat(p+"self_attn.v_proj.weight"), h), c.KVHeads)
			for i := range q[t] {
				q[t][i] = ropeNaive(q[t][i], t, c.RopeTheta)
			}
			for i := range k[t] {
				k[t][i] = ropeNaive(k[t][i], t, c.RopeTheta)
			}
		}
		att := attentionNaive(q, k, v, c.Heads, c.KVHeads)
		for t := range seq {
			o := matVec(w.mat(p+"self_attn.o_proj.weight"), att[t])
			for i := range x[t] {
				x[t][i] += o[i]
			}
			h := rmsnormNaive(x[t], w.vec(p+"post_attention_layernorm.weight"), c.NormEps)
			gate, up := matVec(w.mat(p+"mlp.gate_proj.weight"), h), matVec(w.mat(p+"mlp.up_proj.weight"), h)
			for i := range gate {
				gate[i] = silu(gate[i]) * up[i]
			}
			d := matVec(w.mat(p+"mlp.down_proj.weight"), gate)
			for i := range x[t] {
				x[t][i] += d[i]
			}
		}
	}
	head := "lm_head.weight"
	if c.TieEmbeddings {
		head = "model.embed_tokens.weight"
	}
	logp, ent := make([][]float64, len(seq)), make([]float64, len(seq))
	for t := range seq {
		z := matVec(w.mat(head), rmsnormNaive(x[t], w.vec("model.norm.weight"), c.NormEps))
		mx := math.Inf(-1)
		for i := range z {
			z[i] /= temp
			mx = math.Max(mx, z[i])
		}
		var s float64
		for _, v := range z {
			s += math.Exp(v - mx)
		}
		for i := range z {
			z[i] -= mx + math.Log(s)
			ent[t] -= math.Exp(z[i]) * z[i]
		}
		logp[t] = z
	}
	return logp, ent
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}

func TestForwardMatchesNaive(t *testing.T) {
	tiny, _ := Preset("tiny")
	tied := tiny
	tied.TieEmbeddings = true
	gqa := Config{Vocab: 11, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 24, Context: 9, RopeTheta: 500, NormEps: 1e-5}
	for _, tc := range []struct {
		name string
		cfg  Config
		lens []int
		t    int
		temp float64
	}{
		{"tiny", tiny, []int{7, 3, 1}, 7, 1},
		{"tied", tied, []int{4, 5}, 6, 0.8},
		{"gqa theta 500", gqa, []int{9, 6}, 9, 1.5},
	} {
		n := testNet(tc.cfg, 5)
		a := testBatch(n, tc.lens, tc.t, 4)
		for r := range a.need { // compare every position, not only the scored ones
			a.need[r] = true
		}
		n.forward(a, tc.temp)
		worst := 0.0
		for b, l := range tc.lens {
			lp, ent := forwardNaive(tc.cfg, n.w.flat, a.tokens[b*tc.t:b*tc.t+l], tc.temp)
			for p := 0; p < l; p++ {
				r := b*tc.t + p
				worst = max(worst, math.Abs(ent[p]-a.ent[r]))
				for v, l := range logProbs(n, a, r, tc.temp) {
					worst = max(worst, math.Abs(lp[p][v]-l))
				}
			}
		}
		if worst > 1e-11 {
			t.Errorf("%s: forward differs from forwardNaive by %.3g (want ≤ 1e-11)", tc.name, worst)
		}
		t.Logf("%s: max |fused − naive| = %.3g", tc.name, worst)
	}
}

// packedSeqs are sequences of unequal prompt and completion lengths, one
// without a completion, to load into a packed workspace.
func packedSeqs(vocab int) []Sequence {
	rng := rand.New(rand.NewPCG(12, 5))
	var seqs []Sequence
	for _, pc := range [][2]int{{3, 4}, {1, 1}, {5, 0}, {2, 6}, {6, 2}} {
		s := Sequence{Prompt: []int{1}, Completion: []int{}}
		for len(s.Prompt) < pc[0] {
			s.Prompt = append(s.Prompt, 3+rng.IntN(vocab-3))
		}
		for len(s.Completion) < pc[1] {
			s.Completion = append(s.Completion, 3+rng.IntN(vocab-3))
		}
		seqs = append(seqs, s)
	}
	return seqs
}

// groupedSeqs are groups of completions that share their prompt, as GRPO
// batches have them: a group of three of unequal lengths, a sequence
// without a completion that ends it (the next with that prompt starts a
// group of its own), a group whose one-token prompt leaves nothing to
// share, and a group of two.
func groupedSeqs(vocab int) []Sequence {
	rng := rand.New(rand.NewPCG(13, 6))
	ids := func(first, n int) []int {
		s := []int{}
		if first > 0 {
			s = append(s, first)
		}
		for len(s) < n {
			s = append(s, 3+rng.IntN(vocab-3))
		}
		return s
	}
	a, b, c := ids(1, 4), ids(1, 1), ids(1, 3)
	var seqs []Sequence
	for _, pc := range []struct {
		prompt []int
		n      int
	}{{a, 3}, {a, 1}, {a, 4}, {a, 0}, {a, 2}, {b, 2}, {b, 3}, {c, 4}, {c, 2}} {
		seqs = append(seqs, Sequence{Prompt: pc.prompt, Completion: ids(0, pc.n)})
	}
	return seqs
}

// TestPackedMatchesNaive: a workspace loaded with sequences of unequal
// lengths packs their rows without padding or each one's last token (rows
// in use: Σ (prompt + completion − 1), none for a sequence without a
// completion; a group's later sequences only from their prompt's last
// token on), and the log-probs and entropies of every completion token
// are those of forwardNaive over the whole sequence.
func TestPackedMatchesNaive(t *testing.T) {
	tiny, _ := Preset("tiny")
	gqa := Config{Vocab: 11, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 24, Context: 9, RopeTheta: 500, NormEps: 1e-5}
	for _, cfg := range []Config{tiny, gqa} {
		for _, tc := range []struct {
			name string
			seqs []Sequence
			rows int
		}{
			{"packed", packedSeqs(cfg.Vocab), 6 + 1 + 0 + 7 + 7},
			{"grouped", groupedSeqs(cfg.Vocab), 6 + 1 + 4 + 0 + 5 + 2 + 3 + 6 + 2},
		} {
			n := testNet(cfg, 5)
			n.workers = 3 // groups split over goroutines
			seqs := tc.seqs
			a := newActs[float64](cfg, len(seqs), paddedLen(cfg, seqs), n.workers, true)
			a.load(seqs, true)
			if a.N != tc.rows {
				t.Fatalf("%s: %d rows in use, want %d", tc.name, a.N, tc.rows)
			}
			n.forward(a, 0.9)
			worst := 0.0
			for i, s := range seqs {
				var ids []int32
				for _, id := range append(append([]int(nil), s.Prompt...), s.Completion...) {
					ids = append(ids, int32(id))
				}
				lp, ent := forwardNaive(cfg, n.w.flat, ids, 0.9)
				for j, id := range s.Completion {
					r, p := a.completionRow(i, s, j), len(s.Prompt)+j-1
					worst = max(worst, math.Abs(ent[p]-a.ent[r]), math.Abs(lp[p][id]-a.lp[r]))
				}
			}
			if worst > 1e-11 {
				t.Errorf("vocab %d, %s: packed forward differs from forwardNaive by %.3g (want ≤ 1e-11)", cfg.Vocab, tc.name, worst)
			}
		}
	}
}

// TestSharedPromptsMatchUnshared: loaded with its groups sharing their
// prompts' rows, a batch has the log-probs, entropies and weight
// gradients it has with every sequence on rows of its own, on one
// goroutine and on several.
func TestSharedPromptsMatchUnshared(t *testing.T) {
	gqa := Config{Vocab: 11, Hidden: 16, Layers: 3, Heads: 4, KVHeads: 2, MLP: 24, Context: 9, RopeTheta: 500, NormEps: 1e-5}
	seqs := groupedSeqs(gqa.Vocab)
	run := func(share bool, workers int) (lp, ent, grad []float64) {
		n := testNet(gqa, 8)
		n.workers = workers
		a := newActs[float64](gqa, len(seqs), paddedLen(gqa, seqs), workers, true)
		a.load(seqs, share)
		rng := rand.New(rand.NewPCG(4, 4))
		for i, s := range seqs {
			for j := range s.Completion {
				r := a.completionRow(i, s, j)
				a.dlp[r], a.dH[r] = rng.NormFloat64(), rng.NormFloat64()
			}
		}
		n.forward(a, 0.8)
		for i, s := range seqs {
			for j := range s.Completion {
				r := a.completionRow(i, s, j)
				lp, ent = append(lp, a.lp[r]), append(ent, a.ent[r])
			}
		}
		grad = make([]float64, len(n.w.flat))
		n.backward(a, bindParams(gqa, grad), 0.8)
		return lp, ent, grad
	}
	wantLp, wantEnt, wantGrad := run(false, 1)
	for _, workers := range []int{1, 3, 5} { // 5: the goroutines' ranges start inside groups
		lp, ent, grad := run(true, workers)
		for _, c := range []struct {
			name      string
			got, want []float64
		}{{"log-probs", lp, wantLp}, {"entropies", ent, wantEnt}, {"gradients", grad, wantGrad}} {
			worst, scale := 0.0, 0.0
			for i := range c.want {
				worst, scale = max(worst, math.Abs(c.got[i]-c.want[i])), max(scale, math.Abs(c.want[i]))
			}
			if worst > 1e-12*max(scale, 1) {
				t.Errorf("workers %d: shared prompts' %s differ from unshared by %.3g (scale %.3g)", workers, c.name, worst, scale)
			}
		}
	}
}
