package gpu

import (
	"cmp"
	"math"
	"slices"
)

// nucleusBins and nucleusBinWidth bin tokens by log-prob for nucleus: bin
// b holds the log-probs in (−(b+1)·width, −b·width], the last bin every
// log-prob below (and NaN).
const (
	nucleusBins     = 256
	nucleusBinWidth = 0.125 // nats
)

// nucleusMargin is how close to top_p (relative) a prefix's mass may come
// before nucleus sorts every token to decide: its total is summed in id
// order, which can differ from the sum in sorted order (the definition) by
// a few units in the last place per token.
const nucleusMargin = 1e-9

// candidates lists the tokens that may be drawn, as Hugging Face generate
// (temperature, then TopKLogitsWarper, then TopPLogitsWarper) and vLLM
// choose them: all tokens when neither TopK nor TopP filters; otherwise,
// most likely first (lowest id first among ties), the tokens at least as
// likely as the TopK-th most likely one (ties with it are kept), then the
// smallest prefix of those whose probability, renormalised over them,
// reaches TopP (the token crossing TopP included, always at least one).
// The list is the prefix of every token sorted most likely first, but
// only as many are sorted as it takes: a top-k of 50 over a vocabulary of
// 150k sorts 50 (and ties), a top-p the tokens of the log-prob bins that
// hold its mass.
func (dr *drawer) candidates() []int {
	k, p := dr.opt.TopK, dr.opt.TopP
	v := len(dr.lp)
	filterK, filterP := k > 0 && k < v, p > 0 && p < 1
	if !filterK && !filterP {
		return dr.allTokens()
	}
	if !filterK {
		return dr.nucleus(p)
	}
	cand := dr.topK(k)
	if filterP {
		cand = topP(dr.p, cand, p)
	}
	return cand
}

// allTokens returns every token id in order (in dr.cand).
func (dr *drawer) allTokens() []int {
	cand := dr.cand[:len(dr.lp)]
	for i := range cand {
		cand[i] = i
	}
	return cand
}

// candKey is a token id and its log-prob, sorted together.
type candKey struct {
	lp float64
	id int
}

// compareKeys is the candidates' order, most likely first: that of a
// stable sort by descending log-prob (NaN last) of the ids in ascending
// order.
func compareKeys(a, b candKey) int {
	if c := cmp.Compare(b.lp, a.lp); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// before reports whether token a comes before token b (compareKeys).
func (dr *drawer) before(a, b int) bool {
	return compareKeys(candKey{dr.lp[a], a}, candKey{dr.lp[b], b}) < 0
}

// sortCand sorts cand most likely first, through dr.keys: each id beside
// its log-prob, so that comparisons read neighbouring memory.
func (dr *drawer) sortCand(cand []int) {
	keys := dr.keys[:0]
	for _, id := range cand {
		keys = append(keys, candKey{lp: dr.lp[id], id: id})
	}
	slices.SortFunc(keys, compareKeys)
	for i, k := range keys {
		cand[i] = k.id
	}
	dr.keys = keys
}

// mostLikely returns the m most likely tokens, most likely first (in
// dr.cand): a heap of the m best seen, whose root is the worst of them.
func (dr *drawer) mostLikely(m int) []int {
	h := dr.cand[:m]
	for i := range h {
		h[i] = i
	}
	for i := m/2 - 1; i >= 0; i-- {
		dr.siftDown(h, i)
	}
	for id := m; id < len(dr.lp); id++ {
		if dr.before(id, h[0]) {
			h[0] = id
			dr.siftDown(h, 0)
		}
	}
	dr.sortCand(h)
	return h
}

// siftDown restores the heap h (every parent after its children, most
// likely first) below position i.
func (dr *drawer) siftDown(h []int, i int) {
	for {
		w := i
		if l := 2*i + 1; l < len(h) && dr.before(h[w], h[l]) {
			w = l
		}
		if r := 2*i + 2; r < len(h) && dr.before(h[w], h[r]) {
			w = r
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// topK returns the k most likely tokens and every token tied with the
// k-th (TopKLogitsWarper removes only scores below the k-th largest),
// most likely first.
func (dr *drawer) topK(k int) []int {
	kth := dr.lp[dr.mostLikely(k)[k-1]]
	if math.IsNaN(kth) { // a NaN ties with nothing: the k themselves
		return dr.cand[:k]
	}
	cand := dr.cand[:0]
	for id, lp := range dr.lp {
		if lp >= kth {
			cand = append(cand, id)
		}
	}
	dr.sortCand(cand)
	return cand
}

// topP returns the smallest prefix of cand (sorted, most likely first)
// whose probability mass p (by token), renormalised over cand, reaches
// top.
func topP(p []float64, cand []int, top float64) []int {
	var total, cum float64
	for _, id := range cand {
		total += p[id]
	}
	for i, id := range cand {
		cum += p[id]
		if cum/total >= top {
			return cand[:i+1]
		}
	}
	return cand
}

// nucleus is top-p over every token: topP of all tokens sorted. Only the
// tokens of the most likely log-prob bins whose mass reaches top are
// sorted (every other token comes after them); where the mass at the
// crossing is within nucleusMargin of top, every token is, so that the
// rounding of the total cannot move the cut.
func (dr *drawer) nucleus(top float64) []int {
	var total float64
	var mass [nucleusBins]float64
	for id, q := range dr.p {
		total += q
		mass[nucleusBin(dr.lp[id])] += q
	}
	last, cum := 0, mass[0]
	for need := top * total * (1 + nucleusMargin); cum < need && last < nucleusBins-1; {
		last++
		cum += mass[last]
	}
	cand := dr.cand[:0]
	for id, lp := range dr.lp {
		if nucleusBin(lp) <= last {
			cand = append(cand, id)
		}
	}
	dr.sortCand(cand)
	cum = 0
	for i, id := range cand {
		prev := cum / total
		if cum += dr.p[id]; cum/total < top {
			continue
		}
		if cum/total-top < nucleusMargin*top || (i > 0 && top-prev < nucleusMargin*top) {
			break
		}
		return cand[:i+1]
	}
	return dr.sortedTopP(top)
}

// nucleusBin is the bin of log-prob lp (≤ 0).
func nucleusBin(lp float64) int {
	b := -lp / nucleusBinWidth
	switch {
	case !(b < nucleusBins-1): // NaN too
		return nucleusBins - 1
	case b < 0:
		return 0
	}
	return int(b)
}

// sortedTopP is top-p by the definition: every token sorted, most likely
// first, then topP.
func (dr *drawer) sortedTopP(top float64) []int {
	cand := dr.allTokens()
	dr.sortCand(cand)
	return topP(dr.p, cand, top)
}
