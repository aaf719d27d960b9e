package gpu

import (
	"math"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// attnShape describes the fused qkv rows of one batch: B sequences, H query
// heads and G key/value heads of width E. Each row of qkv holds [q heads |
// k heads | v heads], so its stride is (H+2G)·E. Sequence b occupies rows
// start[b]..start[b+1]-1, at most T of them (packed, see planRows); a nil
// start means every sequence has T rows (row b·T + t is position t of
// sequence b).
//
// A sequence may share its first pre[b] positions with the sequence before
// it (a group's completions share their prompt): those keys and values are
// rows from[b]..from[b]+pre[b]-1 of the group's first sequence, and its own
// rows hold positions pre[b] on. The sequences of a group are adjacent and
// its first has pre 0; nil pre means no sharing. The probabilities of
// sequence b and head h are the top-left corner of a [T, T] block of probs,
// with row stride T: a row per own row, a column per key (shared ones
// first).
type attnShape struct {
	B, T, H, G, E int
	start         []int32
	pre, from     []int32
}

func (s attnShape) stride() int      { return (s.H + 2*s.G) * s.E }
func (s attnShape) heads() headShape { return headShape{s.H, s.G, s.E} }
func (s attnShape) kvHead(h int) int { return h / (s.H / s.G) } // Hugging Face repeat_kv

// seq returns the first row of sequence b and its number of rows.
func (s attnShape) seq(b int) (first, n int) {
	if s.start == nil {
		return b * s.T, s.T
	}
	return int(s.start[b]), int(s.start[b+1] - s.start[b])
}

// shared returns the first row and the number of the keys sequence b shares
// with its group's first sequence (0, 0 for none).
func (s attnShape) shared(b int) (from, pre int) {
	if s.pre == nil {
		return 0, 0
	}
	return int(s.from[b]), int(s.pre[b])
}

// groupStart is the first sequence at or after b that starts a group: the
// workers split a batch's sequences at these, so that a group's sequences
// run in order on one goroutine.
func (s attnShape) groupStart(b int) int {
	for s.pre != nil && b < s.B && s.pre[b] > 0 {
		b++
	}
	return b
}

// eachGroupRange runs f over [0, B) split into ranges of whole groups on up
// to workers goroutines; f's chunk numbers each goroutine's range.
func (s attnShape) eachGroupRange(workers int, f func(chunk, lo, hi int)) {
	if workers <= 1 {
		f(0, 0, s.B)
		return
	}
	parallelFor(s.B, workers, func(chunk, lo, hi int) {
		if lo, hi = s.groupStart(lo), s.groupStart(hi); lo < hi {
			f(chunk, lo, hi)
		}
	})
}

// rotation is the RoPE of a batch's rows: the position of each row and the
// tables of ropeTable. attention applies it to each sequence's queries and
// keys just before using them, while they are in cache, and
// attentionBackward its inverse to their gradients.
type rotation[F Float] struct {
	pos      []int32
	cos, sin []F
}

// rotate rotates (sign 1) or unrotates (−1) the q and k heads of sequence
// b's rows of x ([rows, stride]); a nil rotation does nothing.
func (r *rotation[F]) rotate(x []F, b int, s attnShape, sign F) {
	if r != nil {
		first, n := s.seq(b)
		ropeRows(x[first*s.stride():], r.pos[first:first+n], s.stride(), s.H+s.G, s.E, r.cos, r.sin, sign)
	}
}

// attention computes causal scaled dot-product attention for every sequence
// and head: P = softmax_causal(q·kᵀ/√E) (stored in probs, [B, H, T, T]) and
// att = P·v ([rows, H·E], heads side by side). Query head h reads key/value
// head h/(H/G). rot, if not nil, first rotates each sequence's q and k in
// place. Groups run in parallel; each sequence writes only its own rows.
func attention[F Float](att, probs, qkv []F, s attnShape, rot *rotation[F], workers int) {
	s.eachGroupRange(workers, func(_, lo, hi int) { attentionSeqs(att, probs, qkv, s, rot, lo, hi) })
}

// attentionSeqs is attention for sequences lo..hi-1 (whole groups), on the
// calling goroutine, in order: a group's shared keys are rotated before
// its later sequences read them.
func attentionSeqs[F Float](att, probs, qkv []F, s attnShape, rot *rotation[F], lo, hi int) {
	qs, he, tt := s.stride(), s.H*s.E, s.T*s.T
	scale := F(1 / math.Sqrt(float64(s.E)))
	for b := lo; b < hi; b++ {
		first, n := s.seq(b)
		if n == 0 {
			continue
		}
		from, pre := s.shared(b)
		rot.rotate(qkv, b, s, 1)
		rows, shared := qkv[first*qs:], qkv[from*qs:]
		for h := 0; h < s.H; h++ {
			g := s.kvHead(h)
			kh, vh := (s.H+g)*s.E, (s.H+s.G+g)*s.E
			q, k, v := rows[h*s.E:], rows[kh:], rows[vh:]
			p, o := probs[(b*s.H+h)*tt:(b*s.H+h+1)*tt], att[first*he+h*s.E:]
			if pre > 0 { // the shared keys: columns 0..pre-1
				gemm(false, true, n, pre, s.E, scale, q, qs, shared[kh:], qs, 0, p, s.T)
			}
			gemm(false, true, n, n, s.E, scale, q, qs, k, qs, 0, p[pre:], s.T)
			causalSoftmax(p, n, pre, s.T)
			beta := F(0)
			if pre > 0 {
				gemm(false, false, n, s.E, pre, 1, p, s.T, shared[vh:], qs, 0, o, he)
				beta = 1
			}
			gemm(false, false, n, s.E, n, 1, p[pre:], s.T, v, qs, beta, o, he)
		}
	}
}

// causalSoftmax replaces each row i < n of the [n, pre+n] score matrix p
// (row stride ld) by the softmax of its first pre+i+1 entries (subtracting
// that row's maximum) and zeros the masked entries after them: row i is
// the query at position pre+i.
func causalSoftmax[F Float](p []F, n, pre, ld int) {
	for i := 0; i < n; i++ {
		row := p[i*ld : i*ld+pre+n]
		k := pre + i + 1
		mx := rowMax(row[:k])
		sum := expShiftRow(row[:k], row[:k], mx, 1)
		scaleRow(row[:k], F(1/sum))
		clear(row[k:])
	}
}

// attentionBackward writes dqkv ([rows, (H+2G)·E]) from datt ([rows, H·E]):
//
//	dP = dO·vᵀ,  dv += Pᵀ·dO,  dS = P ⊙ (dP − rowsum(dP ⊙ P)) / √E,
//	dq = dS·k,   dk += dSᵀ·q,
//
// summing over the query heads that share a key/value head, and over a
// group's sequences for its shared keys; rot, if not nil, then unrotates
// each group's dq and dk (the gradient wrt the unrotated q and k). scratch
// holds workers·T·T elements.
func attentionBackward[F Float](dqkv, datt, qkv, probs, scratch []F, s attnShape, rot *rotation[F], workers int) {
	tt := s.T * s.T
	s.eachGroupRange(workers, func(chunk, lo, hi int) {
		attentionBackwardSeqs(dqkv, datt, qkv, probs, scratch[chunk*tt:(chunk+1)*tt], s, rot, lo, hi)
	})
}

// attentionBackwardSeqs is attentionBackward for sequences lo..hi-1 (whole
// groups), on the calling goroutine, with dp ([T, T]) as scratch. A
// group's first sequence clears its dk and dv before the later ones add
// to its shared rows, and the group is unrotated once all have.
func attentionBackwardSeqs[F Float](dqkv, datt, qkv, probs, dp []F, s attnShape, rot *rotation[F], lo, hi int) {
	qs, he, tt := s.stride(), s.H*s.E, s.T*s.T
	scale := F(1 / math.Sqrt(float64(s.E)))
	group := lo
	for b := lo; b < hi; b++ {
		if first, n := s.seq(b); n > 0 {
			from, pre := s.shared(b)
			rows, drows := qkv[first*qs:], dqkv[first*qs:]
			shared, dshared := qkv[from*qs:], dqkv[from*qs:]
			for t := 0; t < n; t++ {
				clear(drows[t*qs+he : (t+1)*qs]) // dk, dv accumulate over heads
			}
			for h := 0; h < s.H; h++ {
				g := s.kvHead(h)
				kh, vh := (s.H+g)*s.E, (s.H+s.G+g)*s.E
				q, k, v := rows[h*s.E:], rows[kh:], rows[vh:]
				dq, dk, dv := drows[h*s.E:], drows[kh:], drows[vh:]
				p := probs[(b*s.H+h)*tt : (b*s.H+h+1)*tt]
				do := datt[first*he+h*s.E:]
				if pre > 0 {
					gemm(false, true, n, pre, s.E, 1, do, he, shared[vh:], qs, 0, dp, s.T)
					gemm(true, false, pre, s.E, n, 1, p, s.T, do, he, 1, dshared[vh:], qs)
				}
				gemm(false, true, n, n, s.E, 1, do, he, v, qs, 0, dp[pre:], s.T)
				gemm(true, false, n, s.E, n, 1, p[pre:], s.T, do, he, 1, dv, qs)
				softmaxBackward(dp, p, n, pre, s.T, scale)
				gemm(false, false, n, s.E, n, 1, dp[pre:], s.T, k, qs, 0, dq, qs)
				gemm(true, false, n, s.E, n, 1, dp[pre:], s.T, q, qs, 1, dk, qs)
				if pre > 0 {
					gemm(false, false, n, s.E, pre, 1, dp, s.T, shared[kh:], qs, 1, dq, qs)
					gemm(true, false, pre, s.E, n, 1, dp, s.T, q, qs, 1, dshared[kh:], qs)
				}
			}
		}
		if b+1 == hi || s.groupStart(b+1) == b+1 { // the group is complete
			for ; group <= b; group++ {
				rot.rotate(dqkv, group, s, -1)
			}
		}
	}
}

// softmaxBackward turns dP into dS = scale · P ⊙ (dP − rowsum(dP ⊙ P)) in
// place for the causal [n, pre+n] probabilities p (row i nonzero in its
// first pre+i+1 entries), both with row stride ld.
func softmaxBackward[F Float](dp, p []F, n, pre, ld int, scale F) {
	for i := 0; i < n; i++ {
		k := pre + i + 1
		d, pr := dp[i*ld:i*ld+pre+n], p[i*ld:i*ld+pre+n]
		if is32[F]() { // d = p·(scale·d − scale·(d·p))
			d32, p32 := as32(d[:k]), as32(pr[:k])
			vec.MulAffine(d32, d32, p32, -float32(scale)*vec.Dot(d32, p32), float32(scale))
			clear(d[k:])
			continue
		}
		var dot F
		for j := 0; j < k; j++ {
			dot += d[j] * pr[j]
		}
		for j := 0; j < k; j++ {
			d[j] = scale * pr[j] * (d[j] - dot)
		}
		clear(d[k:])
	}
}

// scaleRow multiplies x by s in place.
func scaleRow[F Float](x []F, s F) {
	if is32[F]() {
		vec.Scale(as32(x), float32(s))
		return
	}
	for i := range x {
		x[i] *= s
	}
}
