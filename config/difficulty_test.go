package config

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// TestTaskDefaults: keys no layer sets follow the task's difficulty; a set
// key is kept, and a budget that cannot learn the task is refused in one
// line naming the key.
func TestTaskDefaults(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		env       []string
		warm, len int
		err       string
	}{
		{name: "default", warm: 1000, len: 8},
		{name: "3-digit addition gets its measured warm start", args: []string{"--task.digits=3"}, warm: 4500, len: 8},
		{name: "3-digit addition on base: not measured", args: []string{"--task.digits=3", "--model.preset=base"}, warm: 1000, len: 8},
		{name: "countdown fits its longest expression", args: []string{"--task.name=countdown"}, warm: 1000, len: 12},
		{name: "4-number countdown", args: []string{"--task.name=countdown", "--task.numbers=4"}, warm: 1600, len: 17},
		{name: "4-number countdown on base: not measured", args: []string{"--task.name=countdown", "--task.numbers=4", "--model.preset=base"}, warm: 1000, len: 17},
		{name: "set by env: kept", args: []string{"--task.digits=3"}, env: []string{"MGRPO_TRAIN__WARM_START_STEPS=2000"}, warm: 2000, len: 8},
		{name: "set by flag: kept", args: []string{"--task.name=countdown", "--generation.max_completion_len=20"}, warm: 1000, len: 20},
		{name: "recipe values kept", args: []string{"--config=recipe:countdown-grpo"}, warm: 600, len: 12},
		{name: "too short for 4 numbers", args: []string{"--config=recipe:countdown-grpo", "--task.numbers=4"},
			err: "config: generation.max_completion_len = 12: too short for countdown with 4 numbers up to 20: a correct answer takes up to 15 tokens plus EOS; use 17"},
		{name: "too few warm-start steps", args: []string{"--task.digits=3", "--train.warm_start_steps=1000"},
			err: "config: train.warm_start_steps = 1000: too few for addition with 3 digits on the small preset: its warm start needed 3450 steps to reach 60% greedy accuracy (docs/RESULTS.md); use 4500, or start from model.checkpoint"},
		{name: "a warm start alone may be short", args: []string{"--task.digits=3", "--train.warm_start_steps=1000", "--train.steps=0"}, warm: 1000, len: 8},
		{name: "from a checkpoint", args: []string{"--task.digits=3", "--train.warm_start_steps=0", "--model.checkpoint=ckpt"}, warm: 0, len: 8},
		{name: "no warm start", args: []string{"--train.warm_start_steps=0"}, warm: 0, len: 8},
		{name: "half the need is enough", args: []string{"--task.digits=3", "--train.warm_start_steps=1725"}, warm: 1725, len: 8},
		{name: "a short warm start of the default task is allowed", args: []string{"--train.warm_start_steps=100"}, warm: 100, len: 8},
	}
	for _, tc := range cases {
		c, err := loadArgs(tc.args, tc.env)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || !errors.Is(err, ErrConflict) {
				t.Errorf("%s: err = %v\nwant %s", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.Train.WarmStartSteps != tc.warm || c.Generation.MaxCompletionLen != tc.len {
			t.Errorf("%s: warm_start_steps %d, max_completion_len %d; want %d, %d", tc.name, c.Train.WarmStartSteps, c.Generation.MaxCompletionLen, tc.warm, tc.len)
		}
	}
}

// TestSolutionChars checks the longest-answer bound against the task
// generators: no solution is longer, and the longest drawn reaches it.
func TestSolutionChars(t *testing.T) {
	for _, tc := range []struct {
		task    Task
		reached bool // the longest of the draws below reaches the bound
	}{
		{Task{Name: "addition", Digits: 2}, true}, {Task{Name: "addition", Digits: 4}, true},
		{Task{Name: "countdown", Numbers: 3, MaxNumber: 20}, true}, {Task{Name: "countdown", Numbers: 4, MaxNumber: 20}, true},
		{Task{Name: "countdown", Numbers: 5, MaxNumber: 20}, false}, {Task{Name: "countdown", Numbers: 3, MaxNumber: 100}, false},
	} {
		task := tc.task
		bound, ok := solutionChars(task)
		if !ok {
			t.Fatalf("%+v: no bound", task)
		}
		gen, err := tasks.New(task.Name, tasks.Options{Digits: task.Digits, Numbers: task.Numbers, MaxNumber: task.MaxNumber})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		longest := ""
		for range 1000 {
			p := gen.Generate(rng)
			s, err := gen.Solution(p, rng)
			if err != nil {
				t.Fatal(err)
			}
			if len(s) > len(longest) {
				longest = s
			}
		}
		if len(longest) > bound || (len(longest) < bound && tc.reached) {
			t.Errorf("%s: longest solution %q (%d), bound %d", taskLabel(task), longest, len(longest), bound)
		}
	}
	if _, ok := solutionChars(Task{Name: "wordproblems"}); ok {
		t.Errorf("word problems have a bound")
	}
	if _, ok := solutionChars(Task{Name: "addition", Digits: 2, Dataset: "x.jsonl"}); ok {
		t.Errorf("a dataset has a bound")
	}
}
