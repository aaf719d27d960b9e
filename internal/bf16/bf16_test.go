package bf16

import (
	"math"
	"testing"
)

// TestRound: exact values stay, ties go to even, carries reach the
// exponent, overflow becomes infinity and NaN the canonical NaN.
func TestRound(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f80_0000, 0x3f80}, // 1
		{0x3f80_8000, 0x3f80}, // a tie below an even mantissa: down
		{0x3f81_8000, 0x3f82}, // a tie below an odd mantissa: up
		{0x3f80_8001, 0x3f81}, // past the tie: up
		{0x3fff_ffff, 0x4000}, // the carry reaches the exponent
		{0x7f7f_ffff, 0x7f80}, // the largest float32 rounds to +Inf
		{0xff80_0000, 0xff80}, // -Inf
		{0x8000_0000, 0x8000}, // -0
		{0x7fc0_0001, 0x7fff}, // NaN
	} {
		if got := Round(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("Round(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	for _, h := range []uint16{0, 0x3f80, 0xc2f7, 0x0001, 0x7f80} {
		if got := Round(Float32(h)); got != h {
			t.Errorf("Round(Float32(%#04x)) = %#04x", h, got)
		}
	}
}
