package gpu

import "github.com/mgrpo/mgrpo/gpu/internal/vec"

// The attention inputs of the other decoder families (Config.Arch), which
// sit between the q/k/v product and RoPE: Qwen2's q/k/v biases (one
// [(H+2G)·E] vector added to every row of the product) and Qwen3's RMSNorm
// of each query head and each key head (weights q_norm and k_norm of size
// E, eps NormEps), applied before the rotation. A Llama layer has neither
// (nil weights) and runs none of this code. Every function here is shared
// by the training and scoring passes (model.go) and the KV-cache decoder
// (sample.go).

// projectQKV computes qkv = x·Wᵀ for the rows rows of x ([rows, D]) with
// W the layer's stacked q/k/v weights, plus the layer's q/k/v bias on
// every row when it has one: the rows start as the bias and the product
// adds to them, so the bias costs a copy per row.
func projectQKV[F Float](mm linear[F], qkv, x []F, lw layerParams[F], rows, d, qs int) {
	if lw.qkvBias == nil {
		mm.NT(qkv, x, lw.qkv, rows, d, qs, false)
		return
	}
	broadcastRows(qkv[:rows*qs], lw.qkvBias)
	mm.NT(qkv, x, lw.qkv, rows, d, qs, true)
}

// broadcastRows copies row into every row of dst ([*, len(row)]).
func broadcastRows[F Float](dst, row []F) {
	for at := 0; at < len(dst); at += len(row) {
		copy(dst[at:at+len(row)], row)
	}
}

// biasBackward accumulates the gradient of a bias added to every row of a
// product: db += Σ_r dy[r] over the rows rows of dy ([rows, len(db)]), as
// one matrix-vector product dyᵀ·ones (ones: at least rows elements of 1),
// in the BLAS's fixed order.
func biasBackward[F Float](db, dy, ones []F, rows int) {
	if rows == 0 {
		return
	}
	d := len(db)
	if is32[F]() {
		blas32Impl.Sgemv(trans(true), rows, d, 1, as32(dy), d, as32(ones), 1, 1, as32(db), 1)
		return
	}
	blas64Impl.Dgemv(trans(true), rows, d, 1, as64(dy), d, as64(ones), 1, 1, as64(db), 1)
}

// headShape is the q/k/v layout of a row: H query heads, then G key heads,
// then G value heads, each of width E.
type headShape struct{ H, G, E int }

func (s headShape) stride() int { return (s.H + 2*s.G) * s.E }

// qk is the width of a row's query and key heads, (H+G)·E.
func (s headShape) qk() int { return (s.H + s.G) * s.E }

// qkNorm RMSNorms, in place, each of the H query heads (weight wq) and G
// key heads (weight wk) of the first rows rows of qkv ([rows, (H+2G)·E]):
// head ← head · inv · w with inv = 1/√(mean(head²) + eps), kept in inv
// ([rows, H+G]). With raw not nil it first keeps the heads as they were in
// raw ([rows, (H+G)·E]) for qkNormBackward; without, only a later pass
// that does not differentiate may read inv.
func qkNorm[F Float](qkv, raw, inv, wq, wk []F, s headShape, rows int, eps float64, workers int) {
	if workers <= 1 {
		qkNormRows(qkv, raw, inv, wq, wk, s, eps, 0, rows)
		return
	}
	parallelFor(rows, workers, func(_, lo, hi int) { qkNormRows(qkv, raw, inv, wq, wk, s, eps, lo, hi) })
}

// qkNormRows is qkNorm over rows lo..hi-1, on the calling goroutine.
func qkNormRows[F Float](qkv, raw, inv, wq, wk []F, s headShape, eps float64, lo, hi int) {
	stride, qk, heads := s.stride(), s.qk(), s.H+s.G
	for r := lo; r < hi; r++ {
		row, in := qkv[r*stride:r*stride+qk], inv[r*heads:(r+1)*heads]
		x := row
		if raw != nil {
			x = raw[r*qk : (r+1)*qk]
			copy(x, row)
		}
		rmsnormRows(row, in, x, wq, s.E, eps, 0, s.H)
		rmsnormRows(row[s.H*s.E:], in[s.H:], x[s.H*s.E:], wk, s.E, eps, 0, s.G)
	}
}

// qkNormBackward turns the gradient wrt the normed query and key heads in
// the first rows rows of dqkv into the gradient wrt the heads before the
// norm (raw and inv of qkNorm), in place, and accumulates the norm
// weights' gradients into dwq and dwk: per head, with g = dy ⊙ w and s its
// 1/rms,
//
//	dx = s·g − s³·x·(g·x)/E,   dw += dy ⊙ x·s
//
// (rmsnormBackward). The weights' sums run first, serially in row order,
// then the heads' gradients split over the rows; scratch holds workers·E
// elements.
func qkNormBackward[F Float](dqkv, dwq, dwk, raw, inv, wq, wk, scratch []F, s headShape, rows, workers int) {
	stride, qk, heads, e := s.stride(), s.qk(), s.H+s.G, s.E
	for r := 0; r < rows; r++ {
		dy, x, in := dqkv[r*stride:], raw[r*qk:], inv[r*heads:]
		for j := 0; j < heads; j++ {
			dw := dwq
			if j >= s.H {
				dw = dwk
			}
			addScaledProduct(dw, dy[j*e:(j+1)*e], x[j*e:(j+1)*e], in[j])
		}
	}
	rowsOf := func(chunk, lo, hi int) {
		tmp := scratch[chunk*e : (chunk+1)*e]
		for r := lo; r < hi; r++ {
			for j := 0; j < heads; j++ {
				w := wq
				if j >= s.H {
					w = wk
				}
				dy := dqkv[r*stride+j*e : r*stride+(j+1)*e]
				copy(tmp, dy)
				clear(dy)
				rmsnormBackwardRows(dy, tmp, raw[r*qk+j*e:], inv[r*heads+j:], w, e, 0, 1)
			}
		}
	}
	if workers <= 1 {
		rowsOf(0, 0, rows)
		return
	}
	parallelFor(rows, workers, rowsOf)
}

// addScaledProduct accumulates dst += a ⊙ b · s.
func addScaledProduct[F Float](dst, a, b []F, s F) {
	if is32[F]() {
		vec.MulAdd(as32(dst), as32(a), as32(b), float32(s))
		return
	}
	for j, v := range a {
		dst[j] += v * b[j] * s
	}
}
