package gpu

import (
	"math"
)

// expF is e^x: math.Exp in float64; in float32 the table-driven exp32,
// several times faster and accurate to a float32 ulp or two (TestExp32),
// which is what the float32 model's sigmoids and softmaxes need.
func expF[F Float](x F) F {
	if is32[F]() {
		return F(exp32(float32(x)))
	}
	return F(math.Exp(float64(x)))
}

// exp2Frac[j] holds the float32 bits of 2^(j/32), j < 32: a constant table
// built once.
var exp2Frac = func() (t [32]uint32) {
	for j := range t {
		t[j] = math.Float32bits(float32(math.Exp2(float64(j) / 32)))
	}
	return t
}()

const (
	expScale = 46.166241308446828   // 32/ln 2
	expHi    = 0.021667480468750000 // (ln 2)/32, high part (exact product with k)
	expLo    = -6.6310761e-6        // (ln 2)/32 − expHi
)

// exp32 computes e^x = 2^(k/32) · e^r with k = round(32x/ln 2) and
// |r| ≤ (ln 2)/64: 2^(k/32) from exp2Frac plus k>>5 added to the exponent
// bits, e^r from its cubic Taylor polynomial (error < 6e-10). Below −87.3 it
// gives the smallest normal 1.2e-38 instead of 0; above 88.72 +Inf; NaN
// stays NaN.
func exp32(x float32) float32 {
	if x < -87.3 {
		x = -87.3
	} else if x > 88.72 {
		x = 88.72
	}
	k := int32(x*expScale+(4096+0.5)) - 4096 // the bias keeps the truncation a floor
	r := x - float32(k)*expHi - float32(k)*expLo
	p := 1 + r*(1+r*(0.5+r*(1.0/6)))
	return p * math.Float32frombits(exp2Frac[k&31]+uint32(k>>5)<<23)
}

// expShiftRow writes dst[i] = e^((z[i] − shift)·scale) and returns the sum in
// float64; the float32 case runs exp32's loop body inline.
func expShiftRow[F Float](dst, z []F, shift, scale F) float64 {
	dst = dst[:len(z)]
	if !is32[F]() {
		var sum float64
		for i, x := range z {
			e := expF((x - shift) * scale)
			dst[i] = e
			sum += float64(e)
		}
		return sum
	}
	return expShiftRow32(as32(dst), as32(z), float32(shift), float32(scale))
}

// expShiftRow32 is expShiftRow for float32 with exp32 written out inline
// (the call is not inlined and dominated the hot loops). dst may alias z.
func expShiftRow32(dst, z []float32, shift, scale float32) float64 {
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

// swigluRows32 is the float32 inner loop of swiglu: sg = σ(g) = 1/(1+e^−g)
// (the exponentials computed in place in sg), y = g·σ(g)·u.
func swigluRows32(y, sg, g, u []float32) {
	y, sg, u = y[:len(g)], sg[:len(g)], u[:len(g)]
	expShiftRow32(sg, g, 0, -1)
	for j, gj := range g {
		s := 1 / (1 + sg[j])
		sg[j] = s
		y[j] = gj * s * u[j]
	}
}

func sigmoid[F Float](x F) F { return 1 / (1 + expF(-x)) }
