package gpu

import (
	"math"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// This file holds the row-wise kernels of the decoder and their backward
// passes. Every kernel writes dst (or accumulates into a gradient named d…)
// and never modifies its inputs. Rows are independent, so the kernels split
// them over workers without changing any result.

// embed gathers rows of the embedding table: dst[r] = table[tokens[r]].
func embed[F Float](dst, table []F, tokens []int32, d int) {
	for r, t := range tokens {
		copy(dst[r*d:(r+1)*d], table[int(t)*d:(int(t)+1)*d])
	}
}

// embedBackward accumulates dTable[tokens[r]] += dy[r], in row order (a
// token may repeat, so this stays serial and deterministic).
func embedBackward[F Float](dTable, dy []F, tokens []int32, d int) {
	for r, t := range tokens {
		row, g := dTable[int(t)*d:(int(t)+1)*d], dy[r*d:(r+1)*d]
		for j := range row {
			row[j] += g[j]
		}
	}
}

// rmsnorm computes dst[r] = x[r] · inv[r] · w with inv[r] = 1/√(mean(x[r]²) + eps),
// storing inv for the backward pass. x, dst: [n, d]; inv: [n]; w: [d].
func rmsnorm[F Float](dst, inv, x, w []F, d int, eps float64, workers int) {
	n := len(x) / d
	if workers <= 1 {
		rmsnormRows(dst, inv, x, w, d, eps, 0, n)
		return
	}
	parallelFor(n, workers, func(_, lo, hi int) { rmsnormRows(dst, inv, x, w, d, eps, lo, hi) })
}

// rmsnormRows is rmsnorm over rows lo..hi-1, on the calling goroutine.
func rmsnormRows[F Float](dst, inv, x, w []F, d int, eps float64, lo, hi int) {
	for r := lo; r < hi; r++ {
		xr, yr := x[r*d:(r+1)*d], dst[r*d:(r+1)*d]
		if is32[F]() {
			x32 := as32(xr)
			s := float32(1 / math.Sqrt(float64(vec.Dot(x32, x32))/float64(d)+eps))
			inv[r] = F(s)
			vec.ScaleMul(as32(yr), x32, as32(w), s)
			continue
		}
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		s := F(1 / math.Sqrt(ss/float64(d)+eps))
		inv[r] = s
		for j, v := range xr {
			yr[j] = v * s * w[j]
		}
	}
}

// rmsnormBackward accumulates the gradients of rmsnorm: with g = dy ⊙ w and
// s = inv[r],
//
//	dx[r] += s·g − s³·x[r]·(g·x[r])/d,   dw += Σ_r dy[r] ⊙ x[r]·s.
func rmsnormBackward[F Float](dx, dw, dy, x, inv, w []F, d int, workers int) {
	n := len(x) / d
	if workers <= 1 {
		rmsnormBackwardRows(dx, dy, x, inv, w, d, 0, n)
	} else {
		parallelFor(n, workers, func(_, lo, hi int) { rmsnormBackwardRows(dx, dy, x, inv, w, d, lo, hi) })
	}
	for r := 0; r < n; r++ { // serial: a fixed summation order over rows
		xr, gr := x[r*d:(r+1)*d], dy[r*d:(r+1)*d]
		s := inv[r]
		if is32[F]() {
			vec.MulAdd(as32(dw), as32(gr), as32(xr), float32(s))
			continue
		}
		for j, v := range xr {
			dw[j] += gr[j] * v * s
		}
	}
}

// rmsnormBackwardRows is the dx part of rmsnormBackward over rows
// lo..hi-1, on the calling goroutine.
func rmsnormBackwardRows[F Float](dx, dy, x, inv, w []F, d int, lo, hi int) {
	for r := lo; r < hi; r++ {
		xr, gr, dr := x[r*d:(r+1)*d], dy[r*d:(r+1)*d], dx[r*d:(r+1)*d]
		s := inv[r]
		if is32[F]() {
			s32 := float32(s)
			c := s32 * s32 * s32 * vec.Dot3(as32(gr), as32(w), as32(xr)) / float32(d)
			vec.RMSBack(as32(dr), as32(gr), as32(xr), as32(w), s32, c)
			continue
		}
		var dot F
		for j, v := range xr {
			dot += gr[j] * w[j] * v
		}
		c := s * s * s * dot / F(d)
		for j, v := range xr {
			dr[j] += s*gr[j]*w[j] - c*v
		}
	}
}

// ropeTable returns cos and sin of pos·f_i for pos < context, i < e/2
// ([context, e/2] each), f_i = θ^(−2i/e) scaled by s (ropeFreqs); Hugging
// Face duplicates them over both halves.
func ropeTable[F Float](context, e int, theta float64, s RopeScaling) (cos, sin []F) {
	half := e / 2
	freqs := ropeFreqs(e, theta, s)
	cos, sin = make([]F, context*half), make([]F, context*half)
	for p := 0; p < context; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) * freqs[i]
			cos[p*half+i], sin[p*half+i] = F(math.Cos(a)), F(math.Sin(a))
		}
	}
	return cos, sin
}

// rope rotates the first heads·e columns of each row of x ([n, stride]) in
// place by its position (Hugging Face rotate_half: with x = [x1, x2],
// x' = [x1·cos − x2·sin, x2·cos + x1·sin]). sign −1 applies the inverse
// rotation, which is the backward pass since the rotation is orthogonal.
// It updates x in place because x is the kernel's own activation buffer.
func rope[F Float](x []F, pos []int32, stride, heads, e int, cos, sin []F, sign F, workers int) {
	if workers <= 1 {
		ropeRows(x, pos, stride, heads, e, cos, sin, sign)
		return
	}
	parallelFor(len(pos), workers, func(_, lo, hi int) {
		ropeRows(x[lo*stride:], pos[lo:hi], stride, heads, e, cos, sin, sign)
	})
}

// ropeRows is rope over the rows of pos, on one goroutine.
func ropeRows[F Float](x []F, pos []int32, stride, heads, e int, cos, sin []F, sign F) {
	half := e / 2
	for r, p := range pos {
		c := cos[int(p)*half : int(p+1)*half]
		s := sin[int(p)*half : int(p+1)*half]
		row := x[r*stride:]
		if is32[F]() {
			vec.RopeHeads(as32(row[:heads*e]), heads, as32(c), as32(s), float32(sign))
			continue
		}
		for h := 0; h < heads; h++ {
			v := row[h*e : (h+1)*e]
			for i := 0; i < half; i++ {
				x1, x2 := v[i], v[i+half]
				v[i] = x1*c[i] - sign*x2*s[i]
				v[i+half] = x2*c[i] + sign*x1*s[i]
			}
		}
	}
}

// swiglu computes dst[r, j] = silu(g)·u = g·σ(g)·u with g = gu[r, j] and
// u = gu[r, m+j] (gu: [n, 2m], gate columns then up columns; dst: [n, m]),
// keeping σ(g) in sig ([n, m]) for the backward pass. A forward-only pass
// keeps nothing: a sig of fewer than n·m values holds one scratch row of m
// per worker.
func swiglu[F Float](dst, sig, gu []F, m int, workers int) {
	n := len(gu) / (2 * m)
	scratch := len(sig) < n*m
	rows := func(chunk, lo, hi int) {
		if scratch {
			swigluRows(dst, sig[chunk*m:(chunk+1)*m], gu, m, lo, hi, 0)
			return
		}
		swigluRows(dst, sig, gu, m, lo, hi, m)
	}
	if workers <= 1 {
		rows(0, 0, n)
		return
	}
	parallelFor(n, workers, rows)
}

// swigluRows is swiglu over rows lo..hi-1, on the calling goroutine, with
// row r's σ at sig[r·stride:] (stride 0: one scratch row).
func swigluRows[F Float](dst, sig, gu []F, m int, lo, hi, stride int) {
	for r := lo; r < hi; r++ {
		g, u := gu[r*2*m:r*2*m+m], gu[r*2*m+m:(r+1)*2*m]
		y, sg := dst[r*m:(r+1)*m], sig[r*stride:r*stride+m]
		if is32[F]() {
			vec.SwiGLU(as32(y), as32(sg), as32(g), as32(u))
			continue
		}
		for j, gj := range g {
			s := sigmoid(gj)
			sg[j] = s
			y[j] = gj * s * u[j]
		}
	}
}

// swigluBackward writes the gradient wrt gu, with σ = sig = σ(g):
//
//	dgate = dy·u·σ·(1 + g·(1−σ)),   dup = dy·g·σ.
func swigluBackward[F Float](dgu, dy, gu, sig []F, m int, workers int) {
	n := len(gu) / (2 * m)
	if workers <= 1 {
		swigluBackwardRows(dgu, dy, gu, sig, m, 0, n)
		return
	}
	parallelFor(n, workers, func(_, lo, hi int) { swigluBackwardRows(dgu, dy, gu, sig, m, lo, hi) })
}

// swigluBackwardRows is swigluBackward over rows lo..hi-1, on the calling
// goroutine.
func swigluBackwardRows[F Float](dgu, dy, gu, sig []F, m int, lo, hi int) {
	for r := lo; r < hi; r++ {
		g, u := gu[r*2*m:r*2*m+m], gu[r*2*m+m:(r+1)*2*m]
		dg, du, d := dgu[r*2*m:r*2*m+m], dgu[r*2*m+m:(r+1)*2*m], dy[r*m:(r+1)*m]
		sg := sig[r*m : (r+1)*m]
		if is32[F]() {
			vec.SwiGLUBack(as32(dg), as32(du), as32(d), as32(g), as32(u), as32(sg))
			continue
		}
		for j, gj := range g {
			s := sg[j]
			dg[j] = d[j] * u[j] * s * (1 + gj*(1-s))
			du[j] = d[j] * gj * s
		}
	}
}

// rowMax returns the largest element of x (len(x) ≥ 1).
func rowMax[F Float](x []F) F {
	if is32[F]() {
		return F(vec.Max(as32(x)))
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}
