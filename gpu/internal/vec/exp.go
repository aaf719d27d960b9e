package vec

import "math"

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

// Exp computes e^x = 2^(k/32) · e^r with k = round(32x/ln 2) and
// |r| ≤ (ln 2)/64: 2^(k/32) from exp2Frac plus k>>5 added to the exponent
// bits, e^r from its cubic Taylor polynomial (error < 6e-10). Below −87.3 it
// gives the smallest normal 1.2e-38 instead of 0; above 88.72 +Inf; NaN
// stays NaN.
func Exp(x float32) float32 {
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
