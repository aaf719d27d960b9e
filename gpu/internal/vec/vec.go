// Package vec holds the float32 vector kernels of the model's hot loops
// (exponentials, SwiGLU, RMSNorm, RoPE, cached attention). Each has a
// portable Go version (…Go), which is also the tests' reference, and on
// amd64 an AVX2+FMA assembly twin (…AVX2, vec_amd64.s) used when the CPU
// has both. It is a package of its own because a package using cgo (gpu,
// in the OpenBLAS build) cannot hold Go assembly.
package vec

import "math"

// ExpShift writes dst[i] = e^((z[i] − shift)·scale) and returns their sum
// in float64. dst may alias z.
func ExpShift(dst, z []float32, shift, scale float32) float64 {
	dst = dst[:len(z)]
	if useAVX2 {
		return expShiftAVX2(dst, z, shift, scale)
	}
	return expShiftGo(dst, z, shift, scale)
}

// SwiGLU computes sg = σ(g) = 1/(1+e^−g) and y = g·σ(g)·u.
func SwiGLU(y, sg, g, u []float32) {
	y, sg, u = y[:len(g)], sg[:len(g)], u[:len(g)]
	if useAVX2 {
		swigluAVX2(y, sg, g, u)
		return
	}
	swigluGo(y, sg, g, u)
}

// SwiGLUBack writes the gradients of SwiGLU wrt gate and up from dy:
// dg = dy·u·σ·(1 + g·(1−σ)), du = dy·g·σ, with σ = sg.
func SwiGLUBack(dg, du, dy, g, u, sg []float32) {
	dg, du, dy, u, sg = dg[:len(g)], du[:len(g)], dy[:len(g)], u[:len(g)], sg[:len(g)]
	if useAVX2 {
		swigluBackAVX2(dg, du, dy, g, u, sg)
		return
	}
	swigluBackGo(dg, du, dy, g, u, sg)
}

// Dot returns Σ a[i]·b[i].
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	if useAVX2 {
		return dotAVX2(a, b)
	}
	return dotGo(a, b)
}

// Dot3 returns Σ a[i]·b[i]·c[i].
func Dot3(a, b, c []float32) float32 {
	b, c = b[:len(a)], c[:len(a)]
	if useAVX2 {
		return dot3AVX2(a, b, c)
	}
	return dot3Go(a, b, c)
}

// ScaleMul writes y = x·w·s.
func ScaleMul(y, x, w []float32, s float32) {
	y, w = y[:len(x)], w[:len(x)]
	if useAVX2 {
		scaleMulAVX2(y, x, w, s)
		return
	}
	scaleMulGo(y, x, w, s)
}

// RMSBack accumulates dx += s·dy·w − c·x.
func RMSBack(dx, dy, x, w []float32, s, c float32) {
	dx, x, w = dx[:len(dy)], x[:len(dy)], w[:len(dy)]
	if useAVX2 {
		rmsBackAVX2(dx, dy, x, w, s, c)
		return
	}
	rmsBackGo(dx, dy, x, w, s, c)
}

// MulAdd accumulates dst += a·b·s.
func MulAdd(dst, a, b []float32, s float32) {
	dst, b = dst[:len(a)], b[:len(a)]
	if useAVX2 {
		mulAddAVX2(dst, a, b, s)
		return
	}
	mulAddGo(dst, a, b, s)
}

// MulAffine writes dst[i] = p[i]·(c0 + c1·x[i]); dst may alias x or p
// (the softmax gradients: dz = p·(c0 + c1·z)).
func MulAffine(dst, x, p []float32, c0, c1 float32) {
	dst, p = dst[:len(x)], p[:len(x)]
	if useAVX2 {
		mulAffineAVX2(dst, x, p, c0, c1)
		return
	}
	mulAffineGo(dst, x, p, c0, c1)
}

// Scale multiplies x by s in place.
func Scale(x []float32, s float32) {
	if useAVX2 {
		scaleAVX2(x, s)
		return
	}
	scaleGo(x, s)
}

// Max returns the largest element of x (len(x) ≥ 1).
func Max(x []float32) float32 {
	if useAVX2 && len(x) >= 8 {
		return maxAVX2(x)
	}
	return maxGo(x)
}

// Scores writes sc[s] = scale·(q · k[s·stride : s·stride+len(q)]) for
// every s < len(sc): one query against len(sc) cached keys.
func Scores(sc, q, k []float32, stride int, scale float32) {
	if len(sc) > 0 {
		_ = k[(len(sc)-1)*stride+len(q)-1]
	}
	if useAVX2 && len(q)%8 == 0 && len(q) > 0 {
		scoresAVX2(sc, q, k, stride, scale)
		return
	}
	scoresGo(sc, q, k, stride, scale)
}

// Mix writes o = Σ_s p[s]·v[s·stride : s·stride+len(o)]: attention
// probabilities applied to len(p) cached values.
func Mix(o, p, v []float32, stride int) {
	if len(p) > 0 {
		_ = v[(len(p)-1)*stride+len(o)-1]
	}
	if useAVX2 && len(o)%8 == 0 && len(o) > 0 {
		mixAVX2(o, p, v, stride)
		return
	}
	mixGo(o, p, v, stride)
}

// Info names the kernel set in use.
func Info() string {
	if useAVX2 {
		return "AVX2+FMA"
	}
	return "Go"
}

// RopeHeads rotates each of heads consecutive heads of v (2·len(c) floats
// each: the rotated heads of one row) by the angles whose cosines and sines
// are c and s: with a head [x1, x2], x' = [x1·c − sign·x2·s,
// x2·c + sign·x1·s].
func RopeHeads(v []float32, heads int, c, s []float32, sign float32) {
	half := len(c)
	v, s = v[:heads*2*half], s[:half]
	if useAVX2 && half%8 == 0 && half > 0 {
		ropeHeadsAVX2(v, heads, c, s, sign)
		return
	}
	for h := 0; h < heads; h++ {
		ropeGo(v[h*2*half:(h+1)*2*half], c, s, sign)
	}
}

// The Go versions. expShiftGo writes Exp out inline (the call is not
// inlined and dominated the loop).

func expShiftGo(dst, z []float32, shift, scale float32) float64 {
	dst = dst[:len(z)]
	var sum float64
	for i, zi := range z {
		x := (zi - shift) * scale
		if x < -87.3 {
			x = -87.3
		} else if x > 88.72 {
			x = 88.72
		}
		k := int32(x*expScale+(4096+0.5)) - 4096
		r := x - float32(k)*expHi - float32(k)*expLo
		p := 1 + r*(1+r*(0.5+r*(1.0/6)))
		e := p * math.Float32frombits(exp2Frac[k&31]+uint32(k>>5)<<23)
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

func swigluGo(y, sg, g, u []float32) {
	y, sg, u = y[:len(g)], sg[:len(g)], u[:len(g)]
	expShiftGo(sg, g, 0, -1)
	for j, gj := range g {
		s := 1 / (1 + sg[j])
		sg[j] = s
		y[j] = gj * s * u[j]
	}
}

func swigluBackGo(dg, du, dy, g, u, sg []float32) {
	dg, du, dy, u, sg = dg[:len(g)], du[:len(g)], dy[:len(g)], u[:len(g)], sg[:len(g)]
	for j, gj := range g {
		s := sg[j]
		dg[j] = dy[j] * u[j] * s * (1 + gj*(1-s))
		du[j] = dy[j] * gj * s
	}
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

func dot3Go(a, b, c []float32) float32 {
	b, c = b[:len(a)], c[:len(a)]
	var s float32
	for i, x := range a {
		s += x * b[i] * c[i]
	}
	return s
}

func scaleMulGo(y, x, w []float32, s float32) {
	y, w = y[:len(x)], w[:len(x)]
	for i, v := range x {
		y[i] = v * s * w[i]
	}
}

func rmsBackGo(dx, dy, x, w []float32, s, c float32) {
	dx, x, w = dx[:len(dy)], x[:len(dy)], w[:len(dy)]
	for i, g := range dy {
		dx[i] += s*g*w[i] - c*x[i]
	}
}

func mulAddGo(dst, a, b []float32, s float32) {
	dst, b = dst[:len(a)], b[:len(a)]
	for i, x := range a {
		dst[i] += x * s * b[i]
	}
}

func scaleGo(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

func maxGo(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}

// scoresGo runs four keys at a time (independent add chains).
func scoresGo(sc, q, k []float32, stride int, scale float32) {
	e, n := len(q), len(sc)
	s := 0
	for ; s+4 <= n; s += 4 {
		k0, k1 := k[s*stride:s*stride+e], k[(s+1)*stride:(s+1)*stride+e]
		k2, k3 := k[(s+2)*stride:(s+2)*stride+e], k[(s+3)*stride:(s+3)*stride+e]
		var a0, a1, a2, a3 float32
		for j, x := range q {
			a0 += x * k0[j]
			a1 += x * k1[j]
			a2 += x * k2[j]
			a3 += x * k3[j]
		}
		sc[s], sc[s+1], sc[s+2], sc[s+3] = a0*scale, a1*scale, a2*scale, a3*scale
	}
	for ; s < n; s++ {
		sc[s] = dotGo(q, k[s*stride:s*stride+e]) * scale
	}
}

func mixGo(o, p, v []float32, stride int) {
	clear(o)
	for s, ps := range p {
		vs := v[s*stride : s*stride+len(o)]
		for j := range o {
			o[j] += ps * vs[j]
		}
	}
}

func ropeGo(v, c, s []float32, sign float32) {
	half := len(c)
	x1s, x2s, s := v[:half], v[half:2*half], s[:half]
	for i, cs := range c {
		x1, x2, sn := x1s[i], x2s[i], sign*s[i]
		x1s[i] = x1*cs - x2*sn
		x2s[i] = x2*cs + x1*sn
	}
}

func mulAffineGo(dst, x, p []float32, c0, c1 float32) {
	dst, p = dst[:len(x)], p[:len(x)]
	for i, v := range x {
		dst[i] = p[i] * (c0 + c1*v)
	}
}
