package rewards_test

import (
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/rewards"
)

// The closed-form weights of spec §1.8: q [.8 .2], reference [0 1], τ 0.5, β 0.4.
func ExampleListwiseWeightsTo() {
	d := rewards.WeightDenominatorTau.Value(0.5, 0.4) // D = τ (DESIGN §3)
	w, err := rewards.ListwiseWeightsTo(nil, []float64{0.8, 0.2}, []float64{0, 1}, d, 0.4)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.4f\n", w)
	// Output: [0.8779 0.1221]
}

// Two prompts with three completions each, group-major.
func ExampleGroupAdvantages() {
	u := []float64{1, 0, 0, 0.5, 0.5, 0.5}
	a, _ := rewards.GroupAdvantages(u, 3, false) // Dr.GRPO: u - mean
	fmt.Printf("%.4f\n", a)
	a, _ = rewards.GroupAdvantages(u, 3, true) // (u - mean)/(std_unbiased + 1e-4)
	fmt.Printf("%.4f\n", a)
	// Output:
	// [0.6667 -0.3333 -0.3333 0.0000 0.0000 0.0000]
	// [1.1545 -0.5773 -0.5773 0.0000 0.0000 0.0000]
}

func ExampleQDistribution() {
	q, _ := rewards.QDistribution([]float64{1, 0}, 2, 1, 0)
	fmt.Printf("%.4f\n", q)
	// Output: [0.7311 0.2689]
}

func ExampleUtilities() {
	accuracy := []float64{1, 0.1, math.NaN(), 1}
	format := []float64{1, 1, 0, 0}
	u, _ := rewards.Utilities([][]float64{accuracy, format}, []float64{1, 0.1})
	fmt.Printf("%.2f\n", u)
	// Output: [1.10 0.20 0.00 1.00]
}

func ExampleExtractAnswer() {
	a, ok := rewards.ExtractAnswer(`so x = \boxed{\frac{1}{2}}.`)
	fmt.Println(a, ok)
	_, ok = rewards.ExtractAnswer("I am not sure.")
	fmt.Println(ok)
	// Output:
	// \frac{1}{2} true
	// false
}

func ExampleBetaController_Update() {
	c := rewards.BetaController{Target: 0.07, Horizon: 50000, StepSize: 0.15}
	fmt.Printf("%.8f\n", c.Update(3, 0.14)) // 3·(1 + 0.15/50000)
	// Output: 3.00000900
}

func ExamplePrepare() {
	in := rewards.PrepareInput{
		K:           2,
		Rewards:     [][]float64{{1, 0, 1, 1}}, // one reward function, 2 prompts × 2
		TokenCounts: []int{5, 7, 4, 4},
		RefLogpSums: []float64{-5, -7, -4, -8},
	}
	cfg := rewards.DefaultPrepareConfig()
	cfg.Objective = rewards.ObjectiveMaxEntListwise
	out, err := rewards.Prepare(in, cfg, 0.5, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("q       %.4f\n", out.Q)
	fmt.Printf("weights %.4f\n", out.Weights)
	fmt.Printf("zero-std groups %v\n", out.ZeroStd)
	// Output:
	// q       [0.7311 0.2689 0.5000 0.5000]
	// weights [0.8808 0.1192 0.5000 0.5000]
	// zero-std groups [false true]
}
