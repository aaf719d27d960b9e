package gpu

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func samplesAsSequences(prompts [][]int, samples []Sample) []Sequence {
	seqs := make([]Sequence, len(samples))
	for i, s := range samples {
		seqs[i] = Sequence{Prompt: prompts[s.Prompt], Completion: s.Tokens}
	}
	return seqs
}

// maxScoreDiff compares the sampler's behaviour log-probs and entropies
// with a full forward pass over prompt+completion at the same temperature.
func maxScoreDiff[F Float](t *testing.T, n *net[F], prompts [][]int, samples []Sample, temp float64) float64 {
	t.Helper()
	seqs := samplesAsSequences(prompts, samples)
	scores := make([]TokenScores, len(seqs))
	scoreInto(scores, n, newBatch[F](n.cfg, len(seqs), paddedLen(n.cfg, seqs), 1, n.workers, false), seqs, temp)
	worst := 0.0
	for i, s := range samples {
		if len(s.LogProbs) != len(s.Tokens) || len(s.Entropies) != len(s.Tokens) {
			t.Fatalf("sample %d: %d log-probs and %d entropies for %d tokens", i, len(s.LogProbs), len(s.Entropies), len(s.Tokens))
		}
		for j := range s.Tokens {
			worst = max(worst, math.Abs(s.LogProbs[j]-scores[i].LogProbs[j]))
			worst = max(worst, math.Abs(s.Entropies[j]-scores[i].Entropies[j]))
		}
	}
	return worst
}

var samplePrompts = [][]int{{1, 19, 14, 20, 32}, {1, 22}, {1, 30, 31, 14, 19, 19, 19, 32}}

func TestSampleLogProbsMatchScoring(t *testing.T) {
	tiny, _ := Preset("tiny")
	gqa := Config{Vocab: 98, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 24, Context: 16, RopeTheta: 10000, NormEps: 1e-6}
	qwen2, qwen3, llama3 := gqa, gqa, gqa
	qwen2.Arch, qwen2.Context = ArchQwen2, 64
	qwen3.Arch, qwen3.HeadWidth, qwen3.Context = ArchQwen3, 6, 64
	llama3.RopeScaling, llama3.Context = RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8}, 64
	for _, tc := range []struct {
		name string
		cfg  Config
		opt  SampleOptions
	}{
		{"qwen2 q/k/v biases", qwen2, SampleOptions{Temperature: 0.9, MaxNewTokens: 20, Seeds: PromptSeeds(7, 16)}},
		{"qwen3 q/k norms, head width 6", qwen3, SampleOptions{Temperature: 1.1, TopK: 8, MaxNewTokens: 20, Seeds: PromptSeeds(8, 16)}},
		{"llama3 RoPE scaling", llama3, SampleOptions{Temperature: 1, MaxNewTokens: 20, Seeds: PromptSeeds(9, 16)}},
		{"tiny T=1", tiny, SampleOptions{Temperature: 1, MaxNewTokens: 12, Seeds: PromptSeeds(1, 16)}},
		{"tiny T=0.7 top-k 5", tiny, SampleOptions{Temperature: 0.7, TopK: 5, MaxNewTokens: 10, Seeds: PromptSeeds(2, 16)}},
		{"tiny top-p 0.9 greedy-off", tiny, SampleOptions{Temperature: 1.3, TopP: 0.9, MaxNewTokens: 10, Seeds: PromptSeeds(3, 16)}},
		{"tiny T=0.8 top-k 6 top-p 0.7", tiny, SampleOptions{Temperature: 0.8, TopK: 6, TopP: 0.7, MaxNewTokens: 10, Seeds: PromptSeeds(6, 16)}},
		{"gqa capped by context", gqa, SampleOptions{Temperature: 1, MaxNewTokens: 50, Seeds: PromptSeeds(4, 16)}},
	} {
		n := testNet(tc.cfg, 21)
		samples, err := sampleNet(n, nil, samplePrompts, 3, tc.opt)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(samples) != 9 || samples[3].Prompt != 1 {
			t.Fatalf("%s: got %d samples, sample 3 of prompt %d; want 9, group-major", tc.name, len(samples), samples[3].Prompt)
		}
		if d := maxScoreDiff(t, n, samplePrompts, samples, tc.opt.Temperature); d > 1e-5 {
			t.Errorf("%s: float64 sampler log-probs differ from scoring by %.3g (want ≤ 1e-5)", tc.name, d)
		} else {
			t.Logf("%s: float64 max |sample − score| = %.3g", tc.name, d)
		}
		for i, s := range samples {
			if want := min(tc.opt.MaxNewTokens, tc.cfg.Context-len(samplePrompts[s.Prompt])); len(s.Tokens) != want || s.Finish != FinishLength {
				t.Errorf("%s: sample %d has %d tokens (%s), want %d (length)", tc.name, i, len(s.Tokens), s.Finish, want)
			}
		}
	}
}

func TestSampleFloat32MatchesScoring(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, err := NewModel(tiny, 7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cpuModelOf(m).net.w.flat { // larger weights: a peaked, non-uniform policy
		cpuModelOf(m).net.w.flat[i] *= 4
	}
	cpuModelOf(m).net.repack()
	samples, err := m.Sample(samplePrompts, 4, SampleOptions{Temperature: 0.9, MaxNewTokens: 16, Seeds: PromptSeeds(9, 16), EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxScoreDiff(t, cpuModelOf(m).net, samplePrompts, samples, 0.9); d > 1e-4 {
		t.Errorf("float32 sampler log-probs differ from scoring by %.3g (want ≤ 1e-4)", d)
	} else {
		t.Logf("float32 max |sample − score| = %.3g", d)
	}
}

func TestSampleSeeded(t *testing.T) {
	tiny, _ := Preset("tiny")
	n := testNet(tiny, 3)
	opt := SampleOptions{Temperature: 1, MaxNewTokens: 8, Seeds: PromptSeeds(42, 16)}
	a, _ := sampleNet(n, nil, samplePrompts, 2, opt)
	b, _ := sampleNet(n, nil, samplePrompts, 2, opt)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed gave different samples")
	}
	// Per-sequence streams: the first prompt's samples do not depend on the
	// other prompts of the batch, as long as the BLAS rounds a row the same
	// whatever the batch size (the pure-Go one does; OpenBLAS need not).
	c, _ := sampleNet(n, nil, samplePrompts[:1], 2, opt)
	if BLASName == "gonum (pure Go)" && !reflect.DeepEqual(a[:2], c) {
		t.Errorf("prompt 0's samples changed when the batch shrank")
	}
	opt.Seeds = PromptSeeds(43, 16)
	d, _ := sampleNet(n, nil, samplePrompts, 2, opt)
	if reflect.DeepEqual(a, d) {
		t.Errorf("seeds 42 and 43 gave identical samples")
	}
}

func TestSampleGreedyTopKAndEOS(t *testing.T) {
	tiny, _ := Preset("tiny")
	n := testNet(tiny, 5)
	greedy, err := sampleNet(n, nil, samplePrompts, 1, SampleOptions{Greedy: true, MaxNewTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	// Greedy tokens are the argmax of the full forward pass at every step.
	seqs := samplesAsSequences(samplePrompts, greedy)
	a := newActs[float64](tiny, len(seqs), paddedLen(tiny, seqs), 2, true)
	a.load(seqs, true)
	n.forward(a, 1)
	for i, s := range seqs {
		for j, tok := range s.Completion {
			row := logProbs(n, a, a.completionRow(i, s, j), 1)
			for v, l := range row {
				if l > row[tok] {
					t.Fatalf("greedy sample %d token %d = %d, but token %d is more likely", i, j, tok, v)
				}
			}
		}
	}
	// Top-k 1 sampling is greedy.
	top1, _ := sampleNet(n, nil, samplePrompts, 2, SampleOptions{Temperature: 1, TopK: 1, MaxNewTokens: 6, Seeds: PromptSeeds(8, 16)})
	for i, s := range top1 {
		if !reflect.DeepEqual(s.Tokens, greedy[s.Prompt].Tokens) {
			t.Errorf("top-k 1 sample %d = %v, want greedy %v", i, s.Tokens, greedy[s.Prompt].Tokens)
		}
	}
	// Declaring the greedy first token as EOS stops after one token, kept.
	eos := greedy[0].Tokens[0]
	stop, _ := sampleNet(n, nil, samplePrompts[:1], 1, SampleOptions{Greedy: true, MaxNewTokens: 6, EOS: eos})
	if got := stop[0]; len(got.Tokens) != 1 || got.Tokens[0] != eos || got.Finish != FinishStop {
		t.Errorf("with EOS %d: tokens %v finish %s, want [%d] stop", eos, got.Tokens, got.Finish, eos)
	}
}

func TestSampleRejectsBadInput(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 1)
	long := make([]int, tiny.Context)
	for _, tc := range []struct {
		name    string
		prompts [][]int
		n       int
		opt     SampleOptions
	}{
		{"empty prompt", [][]int{{}}, 1, SampleOptions{Temperature: 1, MaxNewTokens: 2}},
		{"token out of range", [][]int{{1, 98}}, 1, SampleOptions{Temperature: 1, MaxNewTokens: 2}},
		{"prompt fills context", [][]int{long}, 1, SampleOptions{Temperature: 1, MaxNewTokens: 2}},
		{"zero temperature", [][]int{{1}}, 1, SampleOptions{MaxNewTokens: 2}},
		{"n = 0", [][]int{{1}}, 0, SampleOptions{Temperature: 1, MaxNewTokens: 2}},
		{"top_p 2", [][]int{{1}}, 1, SampleOptions{Temperature: 1, TopP: 2, MaxNewTokens: 2}},
		{"no new tokens", [][]int{{1}}, 1, SampleOptions{Temperature: 1}},
	} {
		if _, err := m.Sample(tc.prompts, tc.n, tc.opt); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// A Model reuses its key/value cache across calls; a reused, larger cache
// gives the same samples as a fresh one.
func TestSampleReusedCache(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 2)
	opt := SampleOptions{Temperature: 1, MaxNewTokens: 9, Seeds: PromptSeeds(5, 16)}
	if _, err := m.Sample(samplePrompts, 4, opt); err != nil { // fills the pool with a large cache
		t.Fatal(err)
	}
	opt.MaxNewTokens = 5
	got, _ := m.Sample(samplePrompts[1:], 2, opt)
	want, _ := sampleNet(cpuModelOf(m).net, nil, samplePrompts[1:], 2, opt)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("samples with a reused cache differ from a fresh cache")
	}
}

// Example distributions of the candidate-set tests: p4 is the top-k then
// top-p example, tied has two tokens tied at the second-largest value.
var (
	p4   = []float64{.4, .3, .2, .1}
	tied = []float64{.387, .235, .235, .143}
)

// drawerWith returns a drawer whose current distribution is probs (as the
// softmax in drawToken would leave it).
func drawerWith(probs []float64, k int, p float64) *drawer {
	dr := newDrawer(len(probs), SampleOptions{Temperature: 1, TopK: k, TopP: p})
	for i, q := range probs {
		dr.p[i], dr.lp[i] = q, math.Log(q)
	}
	return dr
}

// The candidate set follows Hugging Face generate (TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper, in that order) and vLLM: top-k keeps
// every token tied with the k-th largest; top-p measures mass renormalised
// over the top-k set and keeps the token that crosses top_p.
func TestDrawerCandidates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probs []float64
		k     int
		p     float64
		want  []int // most likely first, lowest id first among ties
	}{
		{"no filter", p4, 0, 1, []int{0, 1, 2, 3}},
		{"top_p 0 is off", p4, 0, 0, []int{0, 1, 2, 3}},
		{"top-k 1", p4, 1, 1, []int{0}},
		{"top-k 2", p4, 2, 1, []int{0, 1}},
		{"top-k = vocab", p4, 4, 1, []int{0, 1, 2, 3}},
		{"top-k > vocab", p4, 10, 1, []int{0, 1, 2, 3}},
		{"top-p below the first token", p4, 0, .35, []int{0}},
		{"top-p crossing token kept", p4, 0, .5, []int{0, 1}},
		{"top-p 0.75", p4, 0, .75, []int{0, 1, 2}},
		{"top-p 0.95", p4, 0, .95, []int{0, 1, 2, 3}},
		{"top-k 2 top-p 0.5 renormalised (.4/.7 ≥ .5)", p4, 2, .5, []int{0}},
		{"top-k 3 top-p 0.75 renormalised (.7/.9 ≥ .75)", p4, 3, .75, []int{0, 1}},
		{"top-k 2 top-p 0.6 renormalised", p4, 2, .6, []int{0, 1}},
		{"top-k 2 keeps the tie with the 2nd value", tied, 2, 1, []int{0, 1, 2}},
		{"top-k 3 drops below the 3rd value", tied, 3, 1, []int{0, 1, 2}},
		{"top-k 1 no tie", tied, 1, 1, []int{0}},
		{"top-k 1 tied at the top", []float64{.3, .3, .2, .2}, 1, 1, []int{0, 1}},
		{"top-k 3 ties extend to the end", []float64{.4, .2, .2, .2}, 3, 1, []int{0, 1, 2, 3}},
		{"ties then top-p on the tied set (.622/.857 ≥ .5)", tied, 2, .5, []int{0, 1}},
		{"ties then top-p keeps all tied", tied, 2, .9, []int{0, 1, 2}},
	} {
		got := drawerWith(tc.probs, tc.k, tc.p).candidates()
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: probs %v top_k %d top_p %g: candidates %v, want %v", tc.name, tc.probs, tc.k, tc.p, got, tc.want)
		}
	}
}

// Draws follow the candidate set renormalised, excluded tokens are never
// drawn, and the returned log-prob is still the full-vocabulary one.
func TestDrawTokenFrequencies(t *testing.T) {
	const draws = 20000
	for _, tc := range []struct {
		name  string
		probs []float64
		k     int
		p     float64
		want  []float64 // expected frequencies; 0 means never drawn
	}{
		{"top-k 2 top-p 0.5: only token 0", p4, 2, .5, []float64{1, 0, 0, 0}},
		{"top-k 2 alone", p4, 2, 1, []float64{.4 / .7, .3 / .7, 0, 0}},
		{"top-p 0.75 alone", p4, 0, .75, []float64{.4 / .9, .3 / .9, .2 / .9, 0}},
		{"top-k 2 with a tie", tied, 2, 1, []float64{.387 / .857, .235 / .857, .235 / .857, 0}},
		{"no filter", p4, 0, 1, p4},
	} {
		z := make([]float64, len(tc.probs))
		for i, q := range tc.probs {
			z[i] = math.Log(q)
		}
		dr := newDrawer(len(z), SampleOptions{Temperature: 1, TopK: tc.k, TopP: tc.p})
		rng := rand.NewPCG(7, 0)
		count := make([]int, len(z))
		for range draws {
			tok, lp, _ := drawToken(dr, z, rng)
			count[tok]++
			if want := math.Log(tc.probs[tok]); math.Abs(lp-want) > 1e-12 {
				t.Fatalf("%s: token %d log-prob %g, want full-vocabulary %g", tc.name, tok, lp, want)
			}
		}
		for i, c := range count {
			f := float64(c) / draws
			if tc.want[i] == 0 && c != 0 || math.Abs(f-tc.want[i]) > .02 {
				t.Errorf("%s: token %d drawn %d/%d times (%.4f), want frequency %.4f", tc.name, i, c, draws, f, tc.want[i])
			}
		}
	}
}

// TestTranspose checks the tiled transpose against the definition on
// shapes that are and are not multiples of the tile, split over one and
// several workers.
func TestTranspose(t *testing.T) {
	for _, tc := range []struct{ rows, cols, workers int }{
		{1, 1, 1}, {3, 5, 2}, {transposeTile, transposeTile, 3}, {transposeTile + 1, 2*transposeTile + 3, 3},
		{200, 7, 4}, {7, 200, 4}, {2*transposeTile - 1, 1, 8}, {1, 3 * transposeTile, 2},
	} {
		w := make([]float32, tc.rows*tc.cols)
		for i := range w {
			w[i] = float32(i)
		}
		got := transpose(w, tc.rows, tc.cols, tc.workers)
		if len(got) != len(w) {
			t.Fatalf("%dx%d: %d values, want %d", tc.rows, tc.cols, len(got), len(w))
		}
		for r := range tc.rows {
			for c := range tc.cols {
				if got[c*tc.rows+r] != w[r*tc.cols+c] {
					t.Fatalf("%dx%d over %d workers: [%d,%d] of the transpose is %g, want %g",
						tc.rows, tc.cols, tc.workers, c, r, got[c*tc.rows+r], w[r*tc.cols+c])
				}
			}
		}
	}
}
