package evaluate_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/actors/evaluate"
)

func ExamplePassAtK() {
	// 10 samples, 3 correct: the chance that 2 drawn without replacement
	// include a correct one is 1 − C(7,2)/C(10,2) = 24/45.
	fmt.Printf("%.4f\n", evaluate.PassAtK(10, 3, 2))
	// With n = k it is "any correct".
	fmt.Println(evaluate.PassAtK(8, 1, 8), evaluate.PassAtK(8, 0, 8))
	// Output:
	// 0.5333
	// 1 0
}
