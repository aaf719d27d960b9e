package gpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// candidatesBySort is the candidate set by its definition: every token
// sorted, most likely first (a stable sort by descending log-prob of the
// ids in ascending order), cut after the TopK-th and the tokens tied with
// it, then the smallest prefix whose mass, renormalised over what is
// left, reaches TopP.
func candidatesBySort(dr *drawer) []int {
	k, p := dr.opt.TopK, dr.opt.TopP
	cand := make([]int, len(dr.lp))
	for i := range cand {
		cand[i] = i
	}
	filterK, filterP := k > 0 && k < len(cand), p > 0 && p < 1
	if !filterK && !filterP {
		return cand
	}
	slices.SortStableFunc(cand, func(a, b int) int { return cmp.Compare(dr.lp[b], dr.lp[a]) })
	if filterK {
		kth := dr.lp[cand[k-1]]
		for k < len(cand) && dr.lp[cand[k]] >= kth {
			k++
		}
		cand = cand[:k]
	}
	if filterP {
		cand = topP(dr.p, cand, p)
	}
	return cand
}

// logitRows are logits rows of the shapes sampling meets: broad and
// peaked, Zipf-like as a language model's, with ties (rounded logits) and
// with tokens masked to −Inf.
func logitRows(r *rand.Rand, v int) map[string][]float64 {
	rows := map[string][]float64{}
	perm := r.Perm(v)
	for _, scale := range []float64{0.1, 1, 3, 10} {
		z := make([]float64, v)
		for i := range z {
			z[i] = r.NormFloat64() * scale
		}
		rows[fmt.Sprintf("normal σ=%g", scale)] = z
	}
	for _, a := range []float64{0.8, 1.1, 2} {
		z := make([]float64, v)
		for i := range z {
			z[i] = -a * math.Log(float64(perm[i]+1))
		}
		rows[fmt.Sprintf("zipf %g", a)] = z
	}
	tied, masked := make([]float64, v), make([]float64, v)
	for i := range tied {
		tied[i] = math.Round(r.NormFloat64() * 2)
		masked[i] = r.NormFloat64()
		if i%3 != 0 {
			masked[i] = math.Inf(-1)
		}
	}
	rows["ties"], rows["two thirds masked"] = tied, masked
	return rows
}

// softmaxDrawer returns a drawer with opt whose distribution is
// softmax(z / T), as drawToken leaves it.
func softmaxDrawer(z []float64, opt SampleOptions) *drawer {
	dr := newDrawer(len(z), opt)
	softmax(dr, z)
	return dr
}

// TestCandidatesMatchSortingEveryToken: the candidates, found by sorting
// only the most likely tokens, are exactly those of sorting every token,
// in the same order, for every filter on rows of every shape.
func TestCandidatesMatchSortingEveryToken(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, v := range []int{1, 2, 7, 300, 5000} {
		for name, z := range logitRows(r, v) {
			for _, temp := range []float64{0.7, 1, 1.3} {
				for _, k := range []int{0, 1, 2, 5, 50, v - 1, v, v + 3} {
					for _, p := range []float64{0, 0.1, 0.5, 0.9, 0.95, 0.999, 1} {
						opt := SampleOptions{Temperature: temp, TopK: k, TopP: p}
						dr := softmaxDrawer(z, opt)
						want := candidatesBySort(dr)
						if got := dr.candidates(); !reflect.DeepEqual(got, want) {
							t.Fatalf("V %d, %s, T %g, top_k %d, top_p %g: %d candidates, want %d (first %v, want %v)",
								v, name, temp, k, p, len(got), len(want), got[:min(len(got), 5)], want[:min(len(want), 5)])
						}
					}
				}
			}
		}
	}
}

// TestNucleusMarginDecidesBySortingEveryToken: a top_p that a prefix's
// mass reaches to within the margin is decided by sorting every token.
// In the last case the total in id order (two tiny masses first, then 1
// and 0.5) is one unit in the last place above the total in sorted order
// (1.5, the tiny masses rounded away): summed in id order, the mass of
// token 2 alone would fall short of top_p = 1/1.5 and token 3 would be
// kept too.
func TestNucleusMarginDecidesBySortingEveryToken(t *testing.T) {
	z := []float64{math.Log(.4), math.Log(.3), math.Log(.2), math.Log(.1)}
	for _, p := range []float64{.7, .7 * (1 + nucleusMargin/2), .7 * (1 - nucleusMargin/2), .9} {
		dr := softmaxDrawer(z, SampleOptions{Temperature: 1, TopP: p})
		if got, want := dr.candidates(), candidatesBySort(dr); !reflect.DeepEqual(got, want) {
			t.Errorf("top_p %.17g: candidates %v, want %v", p, got, want)
		}
	}
	dr := drawerWith([]float64{1e-16, 1e-16, 1, .5}, 0, 1/1.5)
	if got, want := dr.candidates(), []int{2}; !reflect.DeepEqual(got, want) || !reflect.DeepEqual(candidatesBySort(dr), want) {
		t.Errorf("total rounded differently by order: candidates %v, by sorting %v, want %v", got, candidatesBySort(dr), want)
	}
}

// BenchmarkCandidates: choosing the candidates of one row of a 49,152 and
// a 151,936 token vocabulary (SmolLM2's, Qwen2.5's) by sorting the most
// likely tokens (candidates) against sorting every token (bySort).
func BenchmarkCandidates(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range []int{49152, 151936} {
		z := logitRows(r, v)["zipf 1.1"]
		for _, opt := range []SampleOptions{{Temperature: 1, TopK: 50}, {Temperature: 0.7, TopP: 0.9}, {Temperature: 1, TopP: 0.9}} {
			dr := softmaxDrawer(z, opt)
			name := fmt.Sprintf("V=%d/T=%g/top_k=%d/top_p=%g", v, opt.Temperature, opt.TopK, opt.TopP)
			b.Run(name+"/candidates", func(b *testing.B) {
				for b.Loop() {
					dr.candidates()
				}
				b.ReportMetric(float64(len(dr.candidates())), "tokens")
			})
			b.Run(name+"/bySort", func(b *testing.B) {
				for b.Loop() {
					candidatesBySort(dr)
				}
			})
		}
	}
}

// BenchmarkDrawToken: one draw from a float32 logits row of SmolLM2's and
// Qwen2.5's vocabulary (a Zipf-like row): the softmax, the candidates and
// the draw.
func BenchmarkDrawToken(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range []int{49152, 151936} {
		row := logitRows(r, v)["zipf 1.1"]
		z := make([]float32, v)
		for i, x := range row {
			z[i] = float32(x)
		}
		for _, opt := range []SampleOptions{{Temperature: 1}, {Temperature: 0.7, TopP: 0.9}, {Temperature: 1, TopK: 50}} {
			b.Run(fmt.Sprintf("V=%d/T=%g/top_k=%d/top_p=%g", v, opt.Temperature, opt.TopK, opt.TopP), func(b *testing.B) {
				dr, rng := newDrawer(v, opt), rand.NewPCG(3, 4)
				for b.Loop() {
					drawToken(dr, z, rng)
				}
			})
		}
	}
}
