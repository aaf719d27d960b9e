package gpu

import (
	"math"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// expF is e^x: math.Exp in float64; in float32 the table-driven vec.Exp,
// several times faster and accurate to a float32 ulp or two (TestExp),
// which is what the float32 model's sigmoids and softmaxes need.
func expF[F Float](x F) F {
	if is32[F]() {
		return F(vec.Exp(float32(x)))
	}
	return F(math.Exp(float64(x)))
}

// expShiftRow writes dst[i] = e^((z[i] − shift)·scale) and returns the sum in
// float64; float32 runs the vector kernel vec.ExpShift.
func expShiftRow[F Float](dst, z []F, shift, scale F) float64 {
	dst = dst[:len(z)]
	if is32[F]() {
		return vec.ExpShift(as32(dst), as32(z), float32(shift), float32(scale))
	}
	var sum float64
	for i, x := range z {
		e := expF((x - shift) * scale)
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

func sigmoid[F Float](x F) F { return 1 / (1 + expF(-x)) }
