package optim_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/optim"
)

func ExampleSchedule_LR() {
	s := optim.Schedule{Kind: optim.Cosine, Warmup: 4, Total: 104, Base: 1e-3, Min: 1e-4}
	for _, step := range []int{0, 3, 54, 104} {
		fmt.Printf("step %d: %.4g\n", step, s.LR(step))
	}
	// Output:
	// step 0: 0.00025
	// step 3: 0.001
	// step 54: 0.00055
	// step 104: 0.0001
}

func ExampleAdamW_Step() {
	opt, err := optim.NewAdamW(0.1, 0.9, 0.999, 1e-8, 0)
	if err != nil {
		panic(err)
	}
	params := []optim.Param{{Name: "w", W: []float32{1}, G: []float32{0.5}}}
	norm := optim.ClipGlobalNorm(params, 1, 1)
	opt.Step(params, 0.1) // first step moves w by ≈ lr·sign(g)
	fmt.Printf("grad norm %.1f, w %.3f\n", norm, params[0].W[0])
	// Output: grad norm 0.5, w 0.900
}
