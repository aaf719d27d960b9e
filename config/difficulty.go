package config

import (
	"fmt"
	"strconv"
)

// What a generated task setting needs, so that a harder setting (more
// digits, more numbers) gets a budget that can learn it: the longest
// correct completion, which generation.max_completion_len must hold, and
// the warm-start steps measured to reach the warm start's target on a
// preset (docs/RESULTS.md §7). A setting read from task.dataset has no
// such figures.

// solutionChars returns the length of the longest correct completion of a
// generated task, and false when it is not known (word problems, datasets):
// addition with d-digit operands writes a sum of at most d+1 digits; a
// countdown expression over n numbers of at most D digits has n·D digits,
// n−1 operators and at most n−2 pairs of parentheses (one per inner node
// of its tree), e.g. "(20-3)*19" for n = 3.
func solutionChars(t Task) (int, bool) {
	if t.Dataset != "" {
		return 0, false
	}
	switch t.Name {
	case "addition":
		return t.Digits + 1, true
	case "countdown":
		d := len(strconv.Itoa(t.MaxNumber))
		return t.Numbers*d + (t.Numbers - 1) + 2*(t.Numbers-2), true
	}
	return 0, false
}

// completionLenFor returns generation.max_completion_len for a task when
// the configuration does not set it: the built-in default, raised to the
// longest correct completion plus EOS and one token of slack.
func completionLenFor(t Task) int {
	n := Default().Generation.MaxCompletionLen
	if chars, ok := solutionChars(t); ok {
		n = max(n, chars+2)
	}
	return n
}

// warmStartNeed is a measured warm start: the supervised steps (at the
// default warm_start_lr and warm_start_batch) after which greedy accuracy
// first reached the warm start's target, or for a setting that does not
// reach it within a reasonable budget, the 20% at the bottom of DESIGN
// §4's band, with what was reached.
type warmStartNeed struct {
	steps   int     // supervised steps
	reached float64 // greedy accuracy then
}

// measuredWarmStart returns the measured warm start of a generated task on
// a preset (docs/RESULTS.md §7), and false for a setting not measured.
func measuredWarmStart(t Task, preset string) (warmStartNeed, bool) {
	if t.Dataset != "" {
		return warmStartNeed{}, false
	}
	type setting struct {
		task   string
		level  int // addition digits, countdown numbers (max_number 20)
		preset string
	}
	s := setting{t.Name, t.Digits, preset}
	if t.Name == "countdown" {
		if t.MaxNumber != 20 {
			return warmStartNeed{}, false
		}
		s.level = t.Numbers
	}
	need, ok := map[setting]warmStartNeed{
		{"addition", 2, "small"}:  {650, 0.48},
		{"addition", 3, "small"}:  {3450, 0.60},
		{"countdown", 3, "small"}: {600, 0.40},
		{"countdown", 3, "base"}:  {600, 0.34},
		{"countdown", 4, "small"}: {1200, 0.22}, // 20–24% from there to 3000 steps
	}[s]
	return need, ok
}

// warmStartStepsFor returns train.warm_start_steps for a configuration
// that does not set it: the built-in cap (the warm start stops earlier
// once it holds its target), raised for a measured setting to 1.3 times
// its need, in hundreds, since a harder setting learns in a jump whose
// step moves with the seed.
func warmStartStepsFor(c *Config) int {
	n := Default().Train.WarmStartSteps
	if need, ok := measuredWarmStart(c.Task, c.Model.Preset); ok {
		n = max(n, (need.steps*13/10+99)/100*100)
	}
	return n
}

// taskDefaults fills the keys that follow the task's difficulty when no
// layer set them (set reports whether a file, env or flag did).
func taskDefaults(c *Config, set func(key string) bool) {
	if !set("generation.max_completion_len") {
		c.Generation.MaxCompletionLen = completionLenFor(c.Task)
	}
	if !set("train.warm_start_steps") {
		c.Train.WarmStartSteps = warmStartStepsFor(c)
	}
}

// validateDifficulty refuses a budget that cannot learn the task: a
// completion length too short to write a correct answer, and, for a
// setting measured to need more warm-start steps than the built-in cap
// (a harder task), a warm start under half of that need before RL steps
// with no checkpoint to start from. A resumed run keeps the budget it was
// started with.
func validateDifficulty(v *validator, c *Config) {
	t := c.Train
	if t.Resume != "" {
		return
	}
	if chars, ok := solutionChars(c.Task); ok {
		v.conflict(c.Generation.MaxCompletionLen > chars, "generation.max_completion_len", c.Generation.MaxCompletionLen,
			fmt.Sprintf("too short for %s: a correct answer takes up to %d tokens plus EOS; use %d", taskLabel(c.Task), chars, chars+2))
	}
	need, ok := measuredWarmStart(c.Task, c.Model.Preset)
	if !ok || need.steps <= Default().Train.WarmStartSteps || c.Model.Checkpoint != "" || t.Steps == 0 || t.WarmStartSteps == 0 {
		return
	}
	v.conflict(2*t.WarmStartSteps >= need.steps, "train.warm_start_steps", t.WarmStartSteps,
		fmt.Sprintf("too few for %s on the %s preset: its warm start needed %d steps to reach %.0f%% greedy accuracy (docs/RESULTS.md); use %d, or start from model.checkpoint",
			taskLabel(c.Task), c.Model.Preset, need.steps, 100*need.reached, (need.steps*13/10+99)/100*100))
}

// taskLabel names a generated task setting, e.g. "addition with 3 digits".
func taskLabel(t Task) string {
	switch t.Name {
	case "addition":
		return fmt.Sprintf("addition with %d digits", t.Digits)
	case "countdown":
		return fmt.Sprintf("countdown with %d numbers up to %d", t.Numbers, t.MaxNumber)
	}
	return t.Name
}
