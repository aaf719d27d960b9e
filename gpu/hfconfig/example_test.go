package hfconfig_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/hfconfig"
)

func ExampleNew() {
	c := hfconfig.New(98, 128, 384, 4, 4, 64, false) // the `base` preset
	fmt.Println(c.Validate(), c.HeadDim, c.NumKeyValueHeads, c.RopeTheta, c.RMSNormEps)
	c.NumKeyValueHeads = 3
	fmt.Println(c.Validate())
	// Output:
	// <nil> 32 4 10000 1e-06
	// hfconfig: invalid config: num_attention_heads = 4: not divisible by num_key_value_heads 3
}
