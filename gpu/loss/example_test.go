package loss_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/loss"
)

// The dr_grpo test vector of spec §1.9a: masks [1,0,0,0] and [1,1,1,1],
// A = 1, on policy (ratio 1), active-token denominator.
func ExampleGRPO() {
	cfg := loss.Default()
	cfg.Type, cfg.DrGRPODenominator = loss.TypeDrGRPO, loss.DenomActiveTokens
	b := loss.Batch{N: 2, T: 4, Mask: []float64{1, 0, 0, 0, 1, 1, 1, 1}, Advantages: []float64{1, 1}}
	lp := []float64{-1, 0, 0, 0, -2, -1, -1, -3}
	res, err := loss.GRPO(cfg, b, lp)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Loss, res.Stats.Tokens, res.DLogp)
	// Output: -1 5 [-0.2 0 0 0 -0.2 -0.2 -0.2 -0.2]
}
