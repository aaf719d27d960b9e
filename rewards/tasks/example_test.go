package tasks_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/mgrpo/mgrpo/rewards/tasks"
)

func ExampleNew() {
	task, err := tasks.New("countdown", tasks.Options{})
	if err != nil {
		panic(err)
	}
	p := tasks.Problem{Prompt: "3,7,9>30:", Answer: "3,7,9>30"}
	for _, c := range []string{"7*3+9", "(9-7)*3", "7*3+"} {
		fmt.Println(c, task.Verify(c, p.Answer))
	}
	// Output:
	// 7*3+9 correct
	// (9-7)*3 wrong
	// 7*3+ malformed
}

func ExampleRewards() {
	task, _ := tasks.New("addition", tasks.Options{})
	rng := rand.New(rand.NewPCG(1, 1))
	p := task.Generate(rng)
	fns, err := tasks.Rewards([]string{"accuracy", "format"}, []float64{1, 0.5}, task, 0)
	if err != nil {
		panic(err)
	}
	completions := []string{p.Answer, "0", "x"}
	answers := []string{p.Answer, p.Answer, p.Answer}
	for _, w := range fns {
		fmt.Println(w.Name, w.Weight, w.Fn(completions, answers))
	}
	// Output:
	// accuracy 1 [1 0.1 0]
	// format 0.5 [1 1 0]
}
