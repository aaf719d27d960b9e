package tasks

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Limits on a countdown spec ("3,7,9>30"), so that a bad dataset line
// cannot make the verifier slow.
const (
	maxSpecNumbers = 16
	maxSpecValue   = 1_000_000_000
	// genAttempts bounds the random expressions tried per generated problem
	// before falling back to the sum of the first two numbers.
	genAttempts = 1000
)

// countdown: reach a target with some of the given numbers.
type countdown struct {
	numbers   int
	maxNumber int
	maxTarget int
	ops       string
}

func newCountdown(opts Options) (*countdown, error) {
	c := &countdown{numbers: opts.Numbers, maxNumber: opts.MaxNumber, maxTarget: opts.MaxTarget, ops: opts.Ops}
	if c.numbers == 0 {
		c.numbers = 3
	}
	if c.maxNumber == 0 {
		c.maxNumber = 20
	}
	if c.maxTarget == 0 {
		c.maxTarget = max(100, 2*c.maxNumber)
	}
	if c.ops == "" {
		c.ops = "+-*/"
	}
	switch {
	case c.numbers < 2 || c.numbers > 6:
		return nil, fmt.Errorf("%w: countdown numbers = %d: must be 2..6", ErrBadOptions, opts.Numbers)
	case c.maxNumber < 1 || c.maxNumber > 1000:
		return nil, fmt.Errorf("%w: countdown max number = %d: must be 1..1000", ErrBadOptions, opts.MaxNumber)
	case c.maxTarget < 2*c.maxNumber || c.maxTarget > maxSpecValue:
		return nil, fmt.Errorf("%w: countdown max target = %d: must be %d..%d (2*max number..)", ErrBadOptions, c.maxTarget, 2*c.maxNumber, maxSpecValue)
	case !validOps(c.ops):
		return nil, fmt.Errorf("%w: countdown ops = %q: must be distinct characters of \"+-*/\" including '+'", ErrBadOptions, opts.Ops)
	}
	return c, nil
}

func validOps(ops string) bool {
	seen := map[rune]bool{}
	for _, r := range ops {
		if !strings.ContainsRune("+-*/", r) || seen[r] {
			return false
		}
		seen[r] = true
	}
	return seen['+']
}

// Name returns "countdown".
func (c *countdown) Name() string { return "countdown" }

// Generate draws the numbers uniformly from [1, maxNumber], then builds a
// random expression over all of them (random order, tree shape and
// operators from ops) and takes its value as the target. An expression is
// rejected if a division has a remainder or divides by zero, or its value
// is outside [1, maxTarget] or equal to one of the numbers; after
// genAttempts rejections the target is the first two numbers' sum.
func (c *countdown) Generate(rng *rand.Rand) Problem {
	nums := make([]int64, c.numbers)
	for i := range nums {
		nums[i] = 1 + rng.Int64N(int64(c.maxNumber))
	}
	target := nums[0] + nums[1]
	for range genAttempts {
		v, ok := randomValue(rng, nums, c.ops)
		if ok && v >= 1 && v <= int64(c.maxTarget) && !contains(nums, v) {
			target = v
			break
		}
	}
	spec := formatSpec(nums, target)
	return Problem{Prompt: spec + ":", Answer: spec}
}

// randomValue combines the numbers, in random order, into one value by
// repeatedly joining two random neighbours with a random operator.
func randomValue(rng *rand.Rand, nums []int64, ops string) (int64, bool) {
	vals := append([]int64(nil), nums...)
	rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	for len(vals) > 1 {
		i := rng.IntN(len(vals) - 1)
		v, ok := applyOp(ops[rng.IntN(len(ops))], vals[i], vals[i+1])
		if !ok {
			return 0, false
		}
		vals[i] = v
		vals = append(vals[:i+1], vals[i+2:]...)
	}
	return vals[0], true
}

// Verify: the completion, trimmed of surrounding spaces, must parse as an
// expression over + - * / and parentheses (no unary minus, no leading
// zeros, at most MaxExprLen bytes and MaxExprDepth nested parentheses), or
// it is Malformed. It is Correct if every literal is one of the numbers,
// each number used at most once (a number listed twice may be used twice),
// every intermediate result is an exact integer (no division by zero or
// with a remainder, no int64 overflow) and the value equals the target;
// otherwise it is Wrong. A malformed answer spec makes every completion
// Malformed.
func (c *countdown) Verify(completion, answer string) Verdict {
	nums, target, err := parseSpec(answer)
	if err != nil {
		return Malformed
	}
	tree, err := parseExpr(strings.Trim(completion, " \t"))
	if err != nil {
		return Malformed
	}
	if !usesAtMostOnce(tree.literals(nil), nums) {
		return Wrong
	}
	if v, ok := tree.eval(); ok && v == target {
		return Correct
	}
	return Wrong
}

// usesAtMostOnce reports whether the literals form a sub-multiset of nums.
func usesAtMostOnce(lits []*node, nums []int64) bool {
	left := map[int64]int{}
	for _, n := range nums {
		left[n]++
	}
	for _, l := range lits {
		if l.huge || left[l.val] == 0 {
			return false
		}
		left[l.val]--
	}
	return true
}

// Solution returns a random correct expression, found by a depth-first
// search over pairs of numbers and operators in random order.
func (c *countdown) Solution(p Problem, rng *rand.Rand) (string, error) {
	nums, target, err := parseSpec(p.Answer)
	if err != nil {
		return "", err
	}
	s, ok := solve(rng, nums, target)
	if !ok {
		return "", fmt.Errorf("%w: countdown %q", ErrNoSolution, p.Answer)
	}
	return s, nil
}

// Canonical prints a well-formed expression with no spaces and the fewest
// parentheses that keep its tree ("( 3*7 )+9" -> "3*7+9"); operand order
// is kept, so "9+3*7" stays distinct. A malformed completion is returned
// with spaces and tabs removed.
func (c *countdown) Canonical(completion string) string {
	tree, err := parseExpr(strings.Trim(completion, " \t"))
	if err != nil {
		return strings.NewReplacer(" ", "", "\t", "").Replace(completion)
	}
	return tree.String()
}

// ValidateAnswer requires a spec "n1,n2,...>target".
func (c *countdown) ValidateAnswer(answer string) error {
	_, _, err := parseSpec(answer)
	return err
}

// formatSpec writes "3,7,9>30".
func formatSpec(nums []int64, target int64) string {
	var b strings.Builder
	for i, n := range nums {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(n, 10))
	}
	b.WriteByte('>')
	b.WriteString(strconv.FormatInt(target, 10))
	return b.String()
}

// parseSpec reads "3,7,9>30": 1..maxSpecNumbers numbers in
// [0, maxSpecValue], '>', and an integer target with |target| <= maxSpecValue.
func parseSpec(spec string) (nums []int64, target int64, err error) {
	list, t, ok := strings.Cut(spec, ">")
	if !ok {
		return nil, 0, fmt.Errorf("%w: countdown spec %q: want \"n1,n2,...>target\"", ErrBadAnswer, spec)
	}
	target, err = strconv.ParseInt(t, 10, 64)
	if err != nil || target < -maxSpecValue || target > maxSpecValue {
		return nil, 0, fmt.Errorf("%w: countdown spec %q: bad target", ErrBadAnswer, spec)
	}
	parts := strings.SplitN(list, ",", maxSpecNumbers+1)
	if len(parts) > maxSpecNumbers {
		return nil, 0, fmt.Errorf("%w: countdown spec %q: more than %d numbers", ErrBadAnswer, spec, maxSpecNumbers)
	}
	nums = make([]int64, len(parts))
	for i, s := range parts {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 || v > maxSpecValue || !isInteger(s) {
			return nil, 0, fmt.Errorf("%w: countdown spec %q: bad number %q", ErrBadAnswer, spec, s)
		}
		nums[i] = v
	}
	return nums, target, nil
}

func contains(nums []int64, v int64) bool {
	for _, n := range nums {
		if n == v {
			return true
		}
	}
	return false
}
