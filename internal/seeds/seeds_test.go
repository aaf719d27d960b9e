package seeds

import "testing"

// TestMixKnownValues checks Mix against the SplitMix64 reference outputs
// for state 0 (the first outputs of splitmix64.c seeded with 0, whose
// state advances by the same constant before mixing).
func TestMixKnownValues(t *testing.T) {
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	var state uint64
	for i, w := range want {
		if got := Mix(state); got != w {
			t.Errorf("output %d = %#x, want %#x", i, got, w)
		}
		state += 0x9e3779b97f4a7c15
	}
}

func TestOfDistinguishesOrderAndLength(t *testing.T) {
	seen := map[uint64]string{}
	for name, s := range map[string]uint64{
		"(1)": Of(1), "(0)": Of(0), "(1,2)": Of(1, 2), "(2,1)": Of(2, 1), "(1,2,0)": Of(1, 2, 0),
	} {
		if other, dup := seen[s]; dup {
			t.Errorf("Of%s = Of%s = %#x", name, other, s)
		}
		seen[s] = name
	}
}
