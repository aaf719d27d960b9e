// Package bf16 is the bfloat16 number format as bits: a float32's top
// half. The CUDA engine's bf16 products and the bf16 weight chunks of the
// wire round the same way, so a weight sent as bf16 is exactly the
// operand the sender's products used.
package bf16

import "math"

// Round rounds x to bfloat16 (to nearest, ties to even, as CUDA's
// __float2bfloat16) and returns its bits; NaN becomes the canonical 0x7fff.
func Round(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fff_ffff > 0x7f80_0000 {
		return 0x7fff
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// Float32 widens bfloat16 bits to the float32 they denote (exact).
func Float32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
