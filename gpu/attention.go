package gpu

import (
	"math"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// attnShape describes the fused qkv rows of one batch: B sequences, H query
// heads and G key/value heads of width E. Each row of qkv holds [q heads |
// k heads | v heads], so its stride is (H+2G)·E. Sequence b occupies rows
// start[b]..start[b+1]-1, at most T of them (packed, see acts.load); a nil
// start means every sequence has T rows (row b·T + t is position t of
// sequence b). The probabilities of sequence b and head h are the top-left
// corner of a [T, T] block of probs, with row stride T.
type attnShape struct {
	B, T, H, G, E int
	start         []int32
}

func (s attnShape) stride() int      { return (s.H + 2*s.G) * s.E }
func (s attnShape) kvHead(h int) int { return h / (s.H / s.G) } // Hugging Face repeat_kv

// seq returns the first row of sequence b and its number of rows.
func (s attnShape) seq(b int) (first, n int) {
	if s.start == nil {
		return b * s.T, s.T
	}
	return int(s.start[b]), int(s.start[b+1] - s.start[b])
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
// place. Sequences run in parallel; each writes only its own rows.
func attention[F Float](att, probs, qkv []F, s attnShape, rot *rotation[F], workers int) {
	if workers <= 1 {
		attentionSeqs(att, probs, qkv, s, rot, 0, s.B)
		return
	}
	parallelFor(s.B, workers, func(_, lo, hi int) { attentionSeqs(att, probs, qkv, s, rot, lo, hi) })
}

// attentionSeqs is attention for sequences lo..hi-1, on the calling
// goroutine.
func attentionSeqs[F Float](att, probs, qkv []F, s attnShape, rot *rotation[F], lo, hi int) {
	qs, he, tt := s.stride(), s.H*s.E, s.T*s.T
	scale := F(1 / math.Sqrt(float64(s.E)))
	for b := lo; b < hi; b++ {
		first, n := s.seq(b)
		if n == 0 {
			continue
		}
		rot.rotate(qkv, b, s, 1)
		rows := qkv[first*qs:]
		for h := 0; h < s.H; h++ {
			g := s.kvHead(h)
			q, k, v := rows[h*s.E:], rows[(s.H+g)*s.E:], rows[(s.H+s.G+g)*s.E:]
			p := probs[(b*s.H+h)*tt : (b*s.H+h+1)*tt]
			gemm(false, true, n, n, s.E, scale, q, qs, k, qs, 0, p, s.T)
			causalSoftmax(p, n, s.T)
			gemm(false, false, n, s.E, n, 1, p, s.T, v, qs, 0, att[first*he+h*s.E:], he)
		}
	}
}

// causalSoftmax replaces each row i < n of the [n, n] score matrix p (row
// stride ld) by the softmax of its first i+1 entries (subtracting that
// row's maximum) and zeros the masked entries i < j < n.
func causalSoftmax[F Float](p []F, n, ld int) {
	for i := 0; i < n; i++ {
		row := p[i*ld : i*ld+n]
		mx := rowMax(row[:i+1])
		sum := expShiftRow(row[:i+1], row[:i+1], mx, 1)
		scaleRow(row[:i+1], F(1/sum))
		clear(row[i+1:])
	}
}

// attentionBackward writes dqkv ([rows, (H+2G)·E]) from datt ([rows, H·E]):
//
//	dP = dO·vᵀ,  dv += Pᵀ·dO,  dS = P ⊙ (dP − rowsum(dP ⊙ P)) / √E,
//	dq = dS·k,   dk += dSᵀ·q,
//
// summing over the query heads that share a key/value head; rot, if not
// nil, then unrotates each sequence's dq and dk (the gradient wrt the
// unrotated q and k). scratch holds workers·T·T elements.
func attentionBackward[F Float](dqkv, datt, qkv, probs, scratch []F, s attnShape, rot *rotation[F], workers int) {
	tt := s.T * s.T
	if workers <= 1 {
		attentionBackwardSeqs(dqkv, datt, qkv, probs, scratch[:tt], s, rot, 0, s.B)
		return
	}
	parallelFor(s.B, workers, func(chunk, lo, hi int) {
		attentionBackwardSeqs(dqkv, datt, qkv, probs, scratch[chunk*tt:(chunk+1)*tt], s, rot, lo, hi)
	})
}

// attentionBackwardSeqs is attentionBackward for sequences lo..hi-1, on the
// calling goroutine, with dp ([T, T]) as scratch.
func attentionBackwardSeqs[F Float](dqkv, datt, qkv, probs, dp []F, s attnShape, rot *rotation[F], lo, hi int) {
	qs, he, tt := s.stride(), s.H*s.E, s.T*s.T
	scale := F(1 / math.Sqrt(float64(s.E)))
	for b := lo; b < hi; b++ {
		first, n := s.seq(b)
		if n == 0 {
			continue
		}
		rows, drows := qkv[first*qs:], dqkv[first*qs:]
		for t := 0; t < n; t++ {
			clear(drows[t*qs+he : (t+1)*qs]) // dk, dv accumulate over heads
		}
		for h := 0; h < s.H; h++ {
			g := s.kvHead(h)
			q, k, v := rows[h*s.E:], rows[(s.H+g)*s.E:], rows[(s.H+s.G+g)*s.E:]
			dq, dk, dv := drows[h*s.E:], drows[(s.H+g)*s.E:], drows[(s.H+s.G+g)*s.E:]
			p := probs[(b*s.H+h)*tt : (b*s.H+h+1)*tt]
			do := datt[first*he+h*s.E:]
			gemm(false, true, n, n, s.E, 1, do, he, v, qs, 0, dp, s.T)
			gemm(true, false, n, s.E, n, 1, p, s.T, do, he, 1, dv, qs)
			softmaxBackward(dp, p, n, s.T, scale)
			gemm(false, false, n, s.E, n, 1, dp, s.T, k, qs, 0, dq, qs)
			gemm(true, false, n, s.E, n, 1, dp, s.T, q, qs, 1, dk, qs)
		}
		rot.rotate(dqkv, b, s, -1)
	}
}

// softmaxBackward turns dP into dS = scale · P ⊙ (dP − rowsum(dP ⊙ P)) in
// place for the causal [n, n] probabilities p (zero above the diagonal),
// both with row stride ld.
func softmaxBackward[F Float](dp, p []F, n, ld int, scale F) {
	for i := 0; i < n; i++ {
		d, pr := dp[i*ld:i*ld+n], p[i*ld:i*ld+n]
		if is32[F]() { // d = p·(scale·d − scale·(d·p))
			d32, p32 := as32(d[:i+1]), as32(pr[:i+1])
			vec.MulAffine(d32, d32, p32, -float32(scale)*vec.Dot(d32, p32), float32(scale))
			clear(d[i+1:])
			continue
		}
		var dot F
		for j := 0; j <= i; j++ {
			dot += d[j] * pr[j]
		}
		for j := 0; j <= i; j++ {
			d[j] = scale * pr[j] * (d[j] - dot)
		}
		clear(d[i+1:])
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
