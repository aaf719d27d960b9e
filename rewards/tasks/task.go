package tasks

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// MaxChars is how many characters a prompt and its completion may take
// together: the policy's context is 64 tokens, one per character, minus BOS
// and EOS. Every built-in task with default Options fits its prompt and
// Solution in MaxChars.
const MaxChars = 62

// Sentinel errors of this package. Returned errors wrap them with context.
var (
	// ErrUnknownTask: New was given a name that is neither a task nor an alias.
	ErrUnknownTask = errors.New("tasks: unknown task")
	// ErrBadOptions: an Options field is out of range.
	ErrBadOptions = errors.New("tasks: bad options")
	// ErrBadAnswer: a gold answer string does not have the task's format.
	ErrBadAnswer = errors.New("tasks: bad answer")
	// ErrNoSolution: Solution found no correct completion for a problem.
	ErrNoSolution = errors.New("tasks: no solution")
	// ErrEmptyDataset: a dataset holds no problems.
	ErrEmptyDataset = errors.New("tasks: empty dataset")
)

// Problem is one prompt with its gold answer. Answer holds everything a
// verifier needs besides the completion: the sum for addition, the final
// number for word problems, and the spec "3,7,9>30" (numbers, '>', target)
// for countdown.
type Problem struct {
	Prompt string `json:"prompt"` // what the policy is given, e.g. "37+45="
	Answer string `json:"answer"` // the gold answer the verifier needs, e.g. "82"
}

// Verdict is what a verifier says about one completion.
type Verdict int

// Verdicts. The zero value is Malformed, so an unset Verdict never scores.
const (
	// Malformed: the completion does not have the task's answer format.
	Malformed Verdict = iota
	// Wrong: the completion is well formed but not a correct answer.
	Wrong
	// Correct: the completion is a correct answer.
	Correct
	// TimedOut: the verifier did not finish within its time limit
	// (VerifyWithin only; Task.Verify never returns it).
	TimedOut
)

// String returns the verdict's lower-case name.
func (v Verdict) String() string {
	switch v {
	case Malformed:
		return "malformed"
	case Wrong:
		return "wrong"
	case Correct:
		return "correct"
	case TimedOut:
		return "timed_out"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Accuracy returns the accuracy reward of a verdict, as the issue and
// TinyZero's countdown reward define it:
//
//	Correct 1.0, Wrong (well formed) 0.1, Malformed or TimedOut 0.
func (v Verdict) Accuracy() float64 {
	switch v {
	case Correct:
		return 1
	case Wrong:
		return 0.1
	}
	return 0
}

// WellFormed reports whether the completion had the answer format
// (Correct or Wrong).
func (v Verdict) WellFormed() bool { return v == Correct || v == Wrong }

// Task generates problems and verifies completions for them. Implementations
// must be safe for concurrent use (the built-in ones are immutable) and must
// never panic on any completion or answer string.
type Task interface {
	// Name is the task's canonical registry name, e.g. "countdown".
	Name() string
	// Generate draws one problem. The same rng state gives the same problem.
	Generate(rng *rand.Rand) Problem
	// Verify judges a completion (the text before EOS) against a gold answer.
	Verify(completion, answer string) Verdict
	// Solution returns one correct completion for p, drawn with rng where
	// the task has several (countdown). Used by the supervised warm start.
	Solution(p Problem, rng *rand.Rand) (string, error)
	// Canonical maps a completion to a normal form: two completions that
	// are the same answer (e.g. countdown expressions differing only in
	// spaces or redundant parentheses) have the same Canonical string.
	// Used to count distinct correct answers.
	Canonical(completion string) string
}

// AnswerValidator is implemented by tasks that can check a gold answer's
// format up front; NewDataset uses it to reject a bad dataset at load time.
type AnswerValidator interface {
	// ValidateAnswer returns an error wrapping ErrBadAnswer if answer does
	// not have the task's gold-answer format.
	ValidateAnswer(answer string) error
}

// Options configures the built-in tasks. A zero field means its default;
// each task reads only its own fields.
type Options struct {
	// Digits is the number of digits of each addition operand, 1..18;
	// operands are uniform in [0, 10^Digits). 0 means 2.
	Digits int
	// Reverse writes addition answers least-significant digit first
	// ("easy mode" of Lee et al. 2024): 37+45= gives "28".
	Reverse bool

	// Numbers is how many numbers a countdown prompt offers, 2..6. 0 means 3.
	Numbers int
	// MaxNumber is the largest countdown number (numbers are uniform in
	// [1, MaxNumber]; 1..1000) and the largest word-problem number
	// (2..1000). 0 means 20.
	MaxNumber int
	// MaxTarget is the largest countdown target, at least 2*MaxNumber so
	// that a reachable target always exists. 0 means max(100, 2*MaxNumber).
	MaxTarget int
	// Ops is the set of countdown operators used to build targets, a
	// subset of "+-*/" that contains '+'. "" means "+-*/". The verifier
	// accepts all four operators regardless.
	Ops string

	// BareAnswers makes word-problem solutions "#### 6" without the
	// scratchpad "3+5=8 8-2=6 ".
	BareAnswers bool
}

// Task names and their aliases. Lookups ignore case and surrounding spaces.
var taskAliases = map[string]string{
	"addition":       "addition",
	"add":            "addition",
	"countdown":      "countdown",
	"countdown_lite": "countdown",
	"countdown-lite": "countdown",
	"wordproblems":   "wordproblems",
	"word_problems":  "wordproblems",
	"word-problems":  "wordproblems",
	"words":          "wordproblems",
}

// Names returns the canonical task names, sorted.
func Names() []string { return canonicalNames(taskAliases) }

// New returns the built-in task called name (or one of its aliases)
// configured by opts.
func New(name string, opts Options) (Task, error) {
	canon, ok := taskAliases[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownTask, name, describeNames(taskAliases))
	}
	switch canon {
	case "addition":
		return newAddition(opts)
	case "countdown":
		return newCountdown(opts)
	default:
		return newWordProblems(opts)
	}
}

// Batch draws n problems from task in order.
func Batch(task Task, rng *rand.Rand, n int) []Problem {
	out := make([]Problem, n)
	for i := range out {
		out[i] = task.Generate(rng)
	}
	return out
}

// canonicalNames returns the distinct values of an alias map, sorted.
func canonicalNames(aliases map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range aliases {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// describeNames lists names with their aliases: "a (aliases: b, c), d".
func describeNames(aliases map[string]string) string {
	var parts []string
	for _, c := range canonicalNames(aliases) {
		var al []string
		for a, t := range aliases {
			if t == c && a != c {
				al = append(al, a)
			}
		}
		sort.Strings(al)
		if len(al) == 0 {
			parts = append(parts, c)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (aliases: %s)", c, strings.Join(al, ", ")))
	}
	return strings.Join(parts, ", ")
}
