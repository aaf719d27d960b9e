package tasks

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultTimeout bounds one Verify call made by a reward function, as the
// original's seed-paper grader does (1 s, then reward 0).
const DefaultTimeout = time.Second

var (
	// ErrUnknownReward: Reward was given a name that is neither a reward
	// function nor an alias.
	ErrUnknownReward = errors.New("tasks: unknown reward function")
	// ErrBadWeights: reward weights do not match the names or are not finite.
	ErrBadWeights = errors.New("tasks: bad reward weights")
	// ErrBadTimeout: a negative verifier timeout.
	ErrBadTimeout = errors.New("tasks: bad verifier timeout")
)

// RewardFunc scores completions against their gold answers, one value per
// completion, with the original's reward-function semantics
// (fn(completions, answers) -> list of floats): answers[i] belongs to
// completions[i], and NaN means "no opinion" (the caller's weighted sum
// skips it). It never modifies its inputs. Unequal lengths are a
// programmer error and panic.
type RewardFunc func(completions, answers []string) []float64

// Weighted is a reward function with its canonical name and weight; a
// completion's utility is the NaN-skipping sum of Weight*Fn over the set.
type Weighted struct {
	Name   string     // canonical reward name, e.g. "accuracy" for "pure_accuracy"
	Weight float64    // finite; may be negative or zero
	Fn     RewardFunc // the reward function
}

// Reward names and their aliases (Open-R1 / maxent_grpo registry names
// where they mean the same thing here). Lookups ignore case and spaces.
var rewardAliases = map[string]string{
	"accuracy":           "accuracy",
	"accuracy_reward":    "accuracy",
	"pure_accuracy":      "accuracy",
	"pure_accuracy_math": "accuracy",
	"correct":            "correct",
	"binary_accuracy":    "correct",
	"binary":             "correct",
	"format":             "format",
	"format_reward":      "format",
	"length":             "length",
	"len":                "length",
	"len_reward":         "length",
	"length_penalty":     "length",
}

// RewardNames returns the canonical reward function names, sorted (Reward
// also takes their aliases).
func RewardNames() []string { return canonicalNames(rewardAliases) }

// Reward returns the reward function called name (or an alias), judging
// completions with task's verifier; each Verify call is bounded by timeout
// (0 means DefaultTimeout) and scores as TimedOut (0) past it.
//
//	accuracy  1 correct, 0.1 well formed but wrong, 0 malformed or timed out
//	correct   1 correct, else 0 (pass@k and eval accuracy)
//	format    1 well formed (correct or wrong), else 0
//	length    Kimi k1.5 length penalty over the call's completions, with
//	          L = length in characters and λ = 0.5 − (L − Lmin)/(Lmax − Lmin):
//	          λ if correct, min(0, λ) otherwise; all 0 when Lmin == Lmax
//
// Every function scores a timed-out completion 0.
func Reward(name string, task Task, timeout time.Duration) (RewardFunc, error) {
	canon, ok := rewardAliases[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownReward, name, describeNames(rewardAliases))
	}
	if timeout < 0 {
		return nil, fmt.Errorf("%w: %v: must be 0 (default %v) or more", ErrBadTimeout, timeout, DefaultTimeout)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	v := verdictsFunc(task, timeout)
	switch canon {
	case "accuracy":
		return perVerdict(v, Verdict.Accuracy), nil
	case "correct":
		return perVerdict(v, func(x Verdict) float64 { return b2f(x == Correct) }), nil
	case "format":
		return perVerdict(v, func(x Verdict) float64 { return b2f(x.WellFormed()) }), nil
	default:
		return func(completions, answers []string) []float64 {
			return lengthPenalty(completions, v(completions, answers))
		}, nil
	}
}

// Rewards resolves names to weighted reward functions. weights may be nil
// (every weight 1, the original's default) or one finite weight per name.
func Rewards(names []string, weights []float64, task Task, timeout time.Duration) ([]Weighted, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no reward functions named", ErrBadWeights)
	}
	if weights != nil && len(weights) != len(names) {
		return nil, fmt.Errorf("%w: %d weights for %d reward functions %v", ErrBadWeights, len(weights), len(names), names)
	}
	out := make([]Weighted, len(names))
	for i, n := range names {
		fn, err := Reward(n, task, timeout)
		if err != nil {
			return nil, err
		}
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%w: weight of %q = %v: must be finite", ErrBadWeights, n, w)
		}
		out[i] = Weighted{Name: rewardAliases[strings.ToLower(strings.TrimSpace(n))], Weight: w, Fn: fn}
	}
	return out, nil
}

// VerifyWithin runs task.Verify in its own goroutine and returns TimedOut
// if it has not answered within timeout (0 or less means DefaultTimeout);
// the caller is never blocked longer. A verifier that overruns keeps
// running until it returns (Go cannot stop it) and its verdict is dropped;
// one that returns in time leaves no goroutine behind. A verifier that
// panics counts as Malformed.
func VerifyWithin(task Task, completion, answer string, timeout time.Duration) Verdict {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	done := make(chan Verdict, 1) // buffered: a late verifier never blocks
	go func() { done <- safeVerify(task, completion, answer) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-done:
		return v
	case <-t.C:
		return TimedOut
	}
}

func safeVerify(task Task, completion, answer string) (v Verdict) {
	defer func() {
		if recover() != nil {
			v = Malformed
		}
	}()
	return task.Verify(completion, answer)
}

// VerifyAll judges completions[i] against answers[i] with VerifyWithin
// (timeout 0 or less means DefaultTimeout), one verdict per completion; evaluation
// can compute verdicts once and derive accuracy, pass@k and distinct
// answers from them. Unequal lengths are a programmer error and panic.
func VerifyAll(task Task, completions, answers []string, timeout time.Duration) []Verdict {
	if len(completions) != len(answers) {
		panic(fmt.Sprintf("tasks: %d completions, %d answers", len(completions), len(answers)))
	}
	out := make([]Verdict, len(completions))
	for i := range completions {
		out[i] = VerifyWithin(task, completions[i], answers[i], timeout)
	}
	return out
}

// verdictsFunc binds VerifyAll to a task and timeout.
func verdictsFunc(task Task, timeout time.Duration) func(completions, answers []string) []Verdict {
	return func(completions, answers []string) []Verdict {
		return VerifyAll(task, completions, answers, timeout)
	}
}

func perVerdict(v func(c, a []string) []Verdict, score func(Verdict) float64) RewardFunc {
	return func(completions, answers []string) []float64 {
		vs := v(completions, answers)
		out := make([]float64, len(vs))
		for i, x := range vs {
			out[i] = score(x)
		}
		return out
	}
}

// lengthPenalty is the Kimi k1.5 length reward (spec §5, Open-R1 len_reward).
func lengthPenalty(completions []string, vs []Verdict) []float64 {
	out := make([]float64, len(completions))
	if len(completions) == 0 {
		return out
	}
	lens := make([]int, len(completions))
	lo, hi := math.MaxInt, 0
	for i, c := range completions {
		lens[i] = utf8.RuneCountInString(c)
		lo, hi = min(lo, lens[i]), max(hi, lens[i])
	}
	if lo == hi {
		return out
	}
	for i, l := range lens {
		lambda := 0.5 - float64(l-lo)/float64(hi-lo)
		switch vs[i] {
		case Correct:
			out[i] = lambda
		case TimedOut:
			out[i] = 0 // no verdict, no penalty: a timeout scores 0 everywhere
		default:
			out[i] = min(0, lambda)
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
