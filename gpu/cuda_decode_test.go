//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// The decoding kernels against the CPU decoder: the key/value cache
// append and attention over it, and the sampler against the drawer.

func TestCUDADecodeAttention(t *testing.T) {
	rt := cudatest.Open(t)
	for i, tc := range []struct{ h, g, e, tmax, slots, r int }{
		{2, 2, 16, 40, 3, 5}, {2, 2, 32, 8, 3, 3}, {9, 3, 64, 200, 4, 6}, {7, 1, 128, 64, 2, 4},
	} {
		t.Run(fmt.Sprintf("H=%d_G=%d_E=%d", tc.h, tc.g, tc.e), func(t *testing.T) {
			runDecodeAttention(t, rt, rand.New(rand.NewPCG(14, uint64(i))), tc.h, tc.g, tc.e, tc.tmax, tc.slots, tc.r)
		})
	}
}

func runDecodeAttention(t *testing.T, rt cuda.Runtime, rng *rand.Rand, h, g, e, tmax, slots, r int) {
	c := Config{Vocab: 64, Hidden: h * e, Layers: 1, Heads: h, KVHeads: g, MLP: 8, Context: tmax}
	qs := (h + 2*g) * e
	cache := slots * g * tmax * e
	kc, vc, qkv := devRand(rng, cache, 1), devRand(rng, cache, 1), devRand(rng, r*qs, 1)
	slot, pos := make([]int32, r), make([]int32, r)
	for i := range slot {
		slot[i], pos[i] = int32(i%slots), int32(rng.IntN(tmax))
	}
	pos[0], pos[r-1] = 0, int32(tmax-1) // one key; the context limit
	slot[r-1] = int32(slots - 1)
	if r > 2 {
		slot[1] = slot[r-1] // two rows of one slot at different positions (a prefill)
		pos[1] = pos[r-1] - 1
	}
	outs := []int32{0, int32(r - 1)}
	for _, rows := range [][]int32{nil, outs} {
		kc64, vc64 := to64(kc), to64(vc)
		want := twinDecode(c, kc64, vc64, to64(qkv), slot, pos, tmax, r, rows)
		dKc, dVc := cudatest.Upload(t, rt, kc), cudatest.Upload(t, rt, vc)
		dQKV, dSlot, dPos := cudatest.Upload(t, rt, qkv), cudatest.Upload(t, rt, slot), cudatest.Upload(t, rt, pos)
		shape := kernels.DecodeShape{H: h, G: g, E: e, Tmax: tmax}
		cudatest.Must(t, kernels.KVAppend(rt, dKc, dVc, dQKV, dSlot, dPos, r, shape))
		closeAll(t, "key cache", devGet(t, rt, dKc, cache), kc64, 0, 0)
		closeAll(t, "value cache", devGet(t, rt, dVc, cache), vc64, 0, 0)
		n, dRows := r, cuda.Ptr(0)
		if rows != nil {
			n, dRows = len(rows), cudatest.Upload(t, rt, rows)
		}
		got := deterministic(t, "decode_attention", func() []float32 {
			att := devOut(t, rt, n*h*e)
			cudatest.Must(t, kernels.DecodeAttention(rt, att, dQKV, dKc, dVc, dSlot, dPos, dRows, n, shape))
			return devGet(t, rt, att, n*h*e)
		})
		closeAll(t, fmt.Sprintf("decode attention (rows %v)", rows), got, want[:n*h*e], 2e-6, 1e-5)
	}
}

// sampleLogits are a row of logits below 2 but for ties at the top (greedy
// takes the lowest id) and around the 5th largest (top-k keeps them all):
// 4, 4, 3.5, 3, then 2.5 three times.
func sampleLogits(rng *rand.Rand, v int) []float32 {
	z := devRand(rng, v, 1)
	for i := range z {
		z[i] = min(z[i], 1.9)
	}
	z[3], z[11] = 4, 4
	z[31], z[30] = 3.5, 3
	z[20], z[21], z[40] = 2.5, 2.5, 2.5
	return z
}

func TestCUDASampleGreedyAndScores(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(14, 10))
	for _, v := range []int{98, 49152} {
		const r = 3
		logits := make([]float32, 0, r*v)
		for range r {
			logits = append(logits, sampleLogits(rng, v)...)
		}
		for _, temp := range []float64{1, 0.6} {
			opt := SampleOptions{Temperature: temp, Greedy: true, EOS: 11}
			toks, lps, ents, finish, _ := runSample(t, rt, logits, r, v, opt, func(i int) (uint64, int, int) { return 1, i, 0 })
			for i := range r {
				best, lp, h, _ := twinDraw(logits[i*v:(i+1)*v], opt)
				if toks[i] != int32(best) || best != 3 {
					t.Fatalf("V=%d T=%v row %d: greedy token %d, CPU %d (want 3: lowest id of a tie)", v, temp, i, toks[i], best)
				}
				closeAll(t, "greedy log-prob", lps[i:i+1], []float64{lp[best]}, 2e-6, 1e-5)
				closeAll(t, "entropy", ents[i:i+1], []float64{h}, 2e-5, 1e-5)
				if finish[i] != 0 {
					t.Errorf("row %d: finish %d after a token that is not EOS, below the limit", i, finish[i])
				}
			}
		}
	}
}

// runSample draws one token for each of r rows of logits, row i keyed
// by key(i) = (seed, completion, count); it returns the tokens, log-probs,
// entropies, finish flags and counts.
func runSample(t *testing.T, rt cuda.Runtime, logits []float32, r, v int, opt SampleOptions, key func(int) (uint64, int, int)) (toks []int32, lp, ent []float32, finish, count []int32) {
	seeds, comp, limit, cnt := make([]uint64, r), make([]int32, r), make([]int32, r), make([]int32, r)
	for i := range r {
		s, j, c := key(i)
		seeds[i], comp[i], cnt[i], limit[i] = s, int32(j), int32(c), 1000
	}
	rows := kernels.SampleRows{Seeds: cudatest.Upload(t, rt, seeds), Completion: cudatest.Upload(t, rt, comp),
		Limit: cudatest.Upload(t, rt, limit), Count: cudatest.Upload(t, rt, cnt)}
	dTok, dLp, dEnt, dFin := cudatest.Alloc[int32](t, rt, r), devOut(t, rt, r), devOut(t, rt, r), cudatest.Alloc[int32](t, rt, r)
	ko := kernels.SampleOptions{Temperature: opt.Temperature, TopK: opt.TopK, TopP: opt.TopP, Greedy: opt.Greedy, EOS: opt.EOS}
	cudatest.Must(t, kernels.SampleTokens(rt, dTok, dLp, dEnt, dFin, cudatest.Upload(t, rt, logits), rows, r, v, ko))
	return cudatest.Download[int32](t, rt, dTok, r), devGet(t, rt, dLp, r), devGet(t, rt, dEnt, r),
		cudatest.Download[int32](t, rt, dFin, r), cudatest.Download[int32](t, rt, rows.Count, r)
}

// TestCUDASampleDistribution draws many tokens from one row of logits
// (each draw its own (seed, completion, position) key) and holds the
// counts to the drawer's candidates and probabilities with a chi-squared
// test: a wrong temperature, a top-k that drops the tied tokens, or a
// top-p off by one token fails it.
func TestCUDASampleDistribution(t *testing.T) {
	rt := cudatest.Open(t)
	const v, draws = 98, 2000
	z := sampleLogits(rand.New(rand.NewPCG(14, 11)), v)
	logits := make([]float32, 0, draws*v)
	for range draws {
		logits = append(logits, z...)
	}
	for _, opt := range []SampleOptions{
		{Temperature: 1}, {Temperature: 0.7, TopK: 5}, {Temperature: 1, TopP: 0.8}, {Temperature: 1.3, TopK: 10, TopP: 0.6},
	} {
		t.Run(fmt.Sprintf("T=%v_k=%d_p=%v", opt.Temperature, opt.TopK, opt.TopP), func(t *testing.T) {
			toks, _, _, _, _ := runSample(t, rt, logits, draws, v, opt, func(i int) (uint64, int, int) { return uint64(i / 7), i % 7, i % 3 })
			_, _, _, cand := twinDraw(z, opt)
			counts := map[int]int{}
			for _, tok := range toks {
				if _, ok := cand[int(tok)]; !ok {
					t.Fatalf("drew token %d, which the drawer never draws (candidates %v)", tok, keys(cand))
				}
				counts[int(tok)]++
			}
			chi2, df := chiSquared(counts, cand, draws)
			if limit := chiSquaredLimit(df); chi2 > limit {
				t.Errorf("chi² = %.1f over %d degrees of freedom, above %.1f (p < 1e-6): counts %v, probabilities %v", chi2, df, limit, counts, cand)
			}
		})
	}
}

func keys(m map[int]float64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// chiSquared is Σ (observed − expected)²/expected over the candidates,
// those expected fewer than 5 times pooled into one cell.
func chiSquared(counts map[int]int, p map[int]float64, n int) (chi2 float64, df int) {
	var poolObs, poolExp float64
	cells := 0
	for _, id := range keys(p) {
		exp, obs := p[id]*float64(n), float64(counts[id])
		if exp < 5 {
			poolObs, poolExp = poolObs+obs, poolExp+exp
			continue
		}
		chi2 += (obs - exp) * (obs - exp) / exp
		cells++
	}
	if poolExp > 0 {
		chi2 += (poolObs - poolExp) * (poolObs - poolExp) / max(poolExp, 1)
		cells++
	}
	return chi2, max(cells-1, 1)
}

// chiSquaredLimit is the chi-squared value that df degrees of freedom
// exceed with probability about 1e-6 (Wilson–Hilferty, z = 4.75).
func chiSquaredLimit(df int) float64 {
	k := float64(df)
	c := 1 - 2/(9*k) + 4.75*math.Sqrt(2/(9*k))
	return k * c * c * c
}

func TestCUDASampleKeysAndFinish(t *testing.T) {
	rt := cudatest.Open(t)
	const v, r = 98, 40
	rng := rand.New(rand.NewPCG(14, 12))
	logits := devRand(rng, r*v, 2)
	opt := SampleOptions{Temperature: 1, TopK: 20, TopP: 0.9}
	key := func(i int) (uint64, int, int) { return uint64(i % 5), i / 5, 3 }
	toks, _, _, _, _ := runSample(t, rt, logits, r, v, opt, key)
	perm := rng.Perm(r) // the same rows in another order: each draw depends on its key only
	shuffled := make([]float32, 0, r*v)
	for _, i := range perm {
		shuffled = append(shuffled, logits[i*v:(i+1)*v]...)
	}
	toks2, _, _, _, _ := runSample(t, rt, shuffled, r, v, opt, func(k int) (uint64, int, int) { return key(perm[k]) })
	for k, i := range perm {
		if toks2[k] != toks[i] {
			t.Fatalf("row %d drew %d, and %d when it came %d-th", i, toks[i], toks2[k], k)
		}
	}

	// two equal logits: token 1 is drawn exactly when the key's uniform
	// number is at least 1/2, which holds the kernel's numbers to DrawUniform
	even := make([]float32, 2*r)
	toks, _, _, _, _ = runSample(t, rt, even, r, 2, SampleOptions{Temperature: 1}, key)
	for i, tok := range toks {
		s, j, c := key(i)
		if want := kernels.DrawUniform(s, j, c) >= 0.5; (tok == 1) != want {
			t.Fatalf("row %d drew %d from two equal logits, DrawUniform = %v", i, tok, kernels.DrawUniform(s, j, c))
		}
	}

	z := []float32{0, 0, 9, 0, 0} // greedy draws 2
	for _, tc := range []struct {
		eos, count, limit int32
		want              int32
	}{{2, 0, 10, 1}, {2, 9, 10, 1}, {3, 9, 10, 2}, {0, 3, 10, 0}} {
		rows := kernels.SampleRows{Seeds: cudatest.Upload(t, rt, []uint64{1}), Completion: cudatest.Upload(t, rt, []int32{0}),
			Limit: cudatest.Upload(t, rt, []int32{tc.limit}), Count: cudatest.Upload(t, rt, []int32{tc.count})}
		fin := cudatest.Alloc[int32](t, rt, 1)
		cudatest.Must(t, kernels.SampleTokens(rt, cudatest.Alloc[int32](t, rt, 1), devOut(t, rt, 1), devOut(t, rt, 1), fin,
			cudatest.Upload(t, rt, z), rows, 1, len(z), kernels.SampleOptions{Greedy: true, EOS: int(tc.eos)}))
		if got := cudatest.Download[int32](t, rt, fin, 1)[0]; got != tc.want {
			t.Errorf("EOS %d, %d of %d tokens drawn: finish %d, want %d", tc.eos, tc.count, tc.limit, got, tc.want)
		}
		if got := cudatest.Download[int32](t, rt, rows.Count, 1)[0]; got != tc.count+1 {
			t.Errorf("count %d after a draw from %d", got, tc.count)
		}
	}
}
