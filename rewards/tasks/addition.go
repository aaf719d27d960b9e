package tasks

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// addition is k-digit addition: prompt "37+45=", completion "82".
type addition struct {
	digits  int
	reverse bool
}

func newAddition(opts Options) (*addition, error) {
	d := opts.Digits
	if d == 0 {
		d = 2
	}
	if d < 1 || d > 18 {
		return nil, fmt.Errorf("%w: addition digits = %d: must be 1..18", ErrBadOptions, opts.Digits)
	}
	return &addition{digits: d, reverse: opts.Reverse}, nil
}

// Name returns "addition".
func (a *addition) Name() string { return "addition" }

// Generate draws two operands uniform in [0, 10^digits).
func (a *addition) Generate(rng *rand.Rand) Problem {
	limit := int64(1)
	for range a.digits {
		limit *= 10
	}
	x, y := rng.Int64N(limit), rng.Int64N(limit)
	sum := strconv.FormatInt(x+y, 10)
	if a.reverse {
		sum = reverseString(sum)
	}
	return Problem{Prompt: fmt.Sprintf("%d+%d=", x, y), Answer: sum}
}

// Verify: Correct iff completion == answer exactly (no trimming: the text
// before EOS must be the number); Wrong if the completion is an optionally
// signed run of ASCII digits; Malformed otherwise.
func (a *addition) Verify(completion, answer string) Verdict {
	if completion == answer && isInteger(answer) {
		return Correct
	}
	if isInteger(completion) {
		return Wrong
	}
	return Malformed
}

// Solution is the answer itself.
func (a *addition) Solution(p Problem, _ *rand.Rand) (string, error) {
	if err := a.ValidateAnswer(p.Answer); err != nil {
		return "", err
	}
	return p.Answer, nil
}

// Canonical returns the completion unchanged: addition answers are exact
// strings.
func (a *addition) Canonical(completion string) string { return completion }

// ValidateAnswer requires an optionally signed run of ASCII digits.
func (a *addition) ValidateAnswer(answer string) error {
	if !isInteger(answer) {
		return fmt.Errorf("%w: addition answer %q is not an integer", ErrBadAnswer, answer)
	}
	return nil
}

// isInteger reports whether s is an optional '-' followed by one or more
// ASCII digits.
func isInteger(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// reverseString reverses an ASCII string.
func reverseString(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
