package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/internal/panel"
)

// The float32 model (the vector kernels of vec.go, its products through
// BLAS sgemm or through the packed weights of internal/panel) against the
// float64 one (the generic kernels the gradient checks verify): forward
// log-probs and entropies, and every weight gradient, at float32 accuracy.
// The shapes give the packed products edge tiles on every side (rows not a
// multiple of 6, outputs not of 16) and a gradient product (MLP 100) that
// stays on BLAS.
func TestFloat32MatchesFloat64(t *testing.T) {
	for _, packed := range []bool{false, true} {
		if packed && !panel.Available() {
			t.Log("no packed kernel on this build: BLAS only")
			continue
		}
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) { float32MatchesFloat64(t, packed) })
	}
}

func float32MatchesFloat64(t *testing.T, packed bool) {
	tiny, _ := Preset("tiny")
	gqa := Config{Vocab: 11, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 24, Context: 8, RopeTheta: 10000, NormEps: 1e-6}
	wide := Config{Vocab: 98, Hidden: 64, Layers: 2, Heads: 2, KVHeads: 1, MLP: 100, Context: 40, RopeTheta: 10000, NormEps: 1e-6}
	for _, tc := range []struct {
		name string
		cfg  Config
		lens []int
		t    int
		temp float64
		seqs []Sequence // if set, the packed batch of these (lens and t unused)
	}{
		{"tiny", tiny, []int{6, 4, 1}, 6, 1, nil},
		{"gqa", gqa, []int{8, 2}, 8, 1.3, nil},
		{"head width 32, MLP 100", wide, []int{37, 20, 9}, 40, 0.7, nil},
		{"head width 32, groups sharing prompts", wide, nil, 0, 0.7, longGroupedSeqs(wide.Vocab)},
	} {
		n64 := testNet(tc.cfg, 13)
		var a64 *acts[float64]
		if tc.seqs != nil {
			a64 = packedBatch(n64, tc.seqs, 5)
			tc.t = a64.T
		} else {
			a64 = testBatch(n64, tc.lens, tc.t, 5)
		}
		w32 := make([]float32, len(n64.w.flat))
		for i, v := range n64.w.flat {
			w32[i] = float32(v)
		}
		n32 := newNet(tc.cfg, w32, 2)
		if packed {
			if n32.pack(true); n32.pk == nil {
				t.Fatalf("%s: weights not packed", tc.name)
			}
		}
		a32 := newActs[float32](tc.cfg, a64.B, tc.t, 2, true)
		if tc.seqs != nil {
			a32.load(tc.seqs, true)
		}
		copy(a32.tokens, a64.tokens)
		copy(a32.targets, a64.targets)
		copy(a32.need, a64.need)
		copy(a32.dlp, a64.dlp)
		copy(a32.dH, a64.dH)
		n64.forward(a64, tc.temp)
		n32.forward(a32, tc.temp)
		worst := 0.0
		for r, need := range a64.need {
			if !need {
				continue
			}
			worst = max(worst, math.Abs(float64(a32.ent[r])-a64.ent[r]))
			lp32, lp64 := logProbs(n32, a32, r, tc.temp), logProbs(n64, a64, r, tc.temp)
			for v, l := range lp64 {
				worst = max(worst, math.Abs(lp32[v]-l)/math.Max(1, math.Abs(l)))
			}
		}
		if worst > 2e-5 {
			t.Errorf("%s: float32 log-probs and entropies differ from float64 by %.3g (want ≤ 2e-5)", tc.name, worst)
		}
		g64, g32 := make([]float64, len(n64.w.flat)), make([]float32, len(w32))
		n64.backward(a64, bindParams(tc.cfg, g64), tc.temp)
		n32.backward(a32, bindParams(tc.cfg, g32), tc.temp)
		worstGrad := 0.0
		for _, s := range newLayout(tc.cfg).specs {
			scale := 0.0
			for _, g := range g64[s.Offset : s.Offset+s.Size()] {
				scale = max(scale, math.Abs(g))
			}
			for i := s.Offset; i < s.Offset+s.Size(); i++ {
				if e := math.Abs(float64(g32[i])-g64[i]) / scale; e > worstGrad {
					worstGrad = e
					if e > 2e-5 {
						t.Errorf("%s: %s[%d]: float32 gradient %g, float64 %g (error %.3g of the tensor's largest)", tc.name, s.Name, i-s.Offset, g32[i], g64[i], e)
					}
				}
			}
		}
		t.Logf("%s: worst float32 error: outputs %.3g, gradients %.3g of each tensor's largest", tc.name, worst, worstGrad)
	}
}

// gatherRows then scatterRows puts the chosen rows back where they were
// and zeros the others, in place.
func TestGatherScatterRows(t *testing.T) {
	for _, rows := range [][]int32{{}, {0}, {4}, {1, 2}, {0, 2, 4}, {0, 1, 2, 3, 4}} {
		const n, d = 5, 3
		src := make([]float64, n*d)
		for i := range src {
			src[i] = float64(i + 1)
		}
		x := make([]float64, n*d)
		gatherRows(x, src, rows, d)
		scatterRows(x, len(rows), rows, d, n)
		want := make([]float64, n*d)
		for _, r := range rows {
			copy(want[int(r)*d:], src[int(r)*d:(int(r)+1)*d])
		}
		for i := range x {
			if x[i] != want[i] {
				t.Fatalf("rows %v: got %v, want %v", rows, x, want)
			}
		}
	}
}

// longGroupedSeqs is three groups of sequences sharing prompts of 12, 7 and
// 1 tokens, with completions of 0 to 20 tokens: enough rows for the
// products' full tiles and their edges.
func longGroupedSeqs(vocab int) []Sequence {
	rng := rand.New(rand.NewPCG(21, 3))
	ids := func(n int) []int { return randomIDs(rng, n, vocab) }
	var seqs []Sequence
	for _, g := range []struct{ prompt, completions []int }{{ids(12), []int{20, 3, 11, 0}}, {ids(7), []int{8, 15}}, {ids(1), []int{6}}} {
		for _, n := range g.completions {
			seqs = append(seqs, Sequence{Prompt: g.prompt, Completion: ids(n)})
		}
	}
	return seqs
}

// randomIDs draws n token ids in [3, vocab): no PAD, BOS or EOS.
func randomIDs(rng *rand.Rand, n, vocab int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 3 + rng.IntN(vocab-3)
	}
	return s
}
