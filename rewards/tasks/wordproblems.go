package tasks

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// finalMarker introduces the final answer of a word problem, as in GSM8K.
const finalMarker = "####"

// wordTemplate is one two-step story: ((a op1 b) op2 c).
type wordTemplate struct {
	format string // fmt format: name, a, [b,] item, ... see render
	ops    [2]byte
	bags   bool // "has A bags of B ITEM": a and b are 2..9
}

// wordTemplates: each renders in at most 37 characters with numbers up to
// 20, so with the longest scratchpad ("20+20=40 40+20=60 #### 60", 25
// characters) a problem fits MaxChars.
var wordTemplates = [...]wordTemplate{
	{format: "%s has %d %s, gets %d, loses %d:", ops: [2]byte{'+', '-'}},
	{format: "%s has %d %s, loses %d, gets %d:", ops: [2]byte{'-', '+'}},
	{format: "%s has %d %s, gets %d, finds %d:", ops: [2]byte{'+', '+'}},
	{format: "%s has %d %s, loses %d, sells %d:", ops: [2]byte{'-', '-'}},
	{format: "%s has %d bags of %d %s, loses %d:", ops: [2]byte{'*', '-'}, bags: true},
	{format: "%s has %d bags of %d %s, gets %d:", ops: [2]byte{'*', '+'}, bags: true},
}

var (
	wordNames = [...]string{"ann", "bob", "tom", "sue", "max", "eve", "kim", "joe", "amy", "ben"}
	wordItems = [...]string{"pens", "cats", "eggs", "cups", "hats", "toys", "keys", "nuts"}
	// wordPatterns[i] matches wordTemplates[i] and captures a, b, c.
	wordPatterns = compileWordPatterns()
)

func compileWordPatterns() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(wordTemplates))
	for i, t := range wordTemplates {
		var args []any
		if t.bags {
			args = []any{"[a-z]+", "(\\d+)", "(\\d+)", "[a-z]+", "(\\d+)"}
		} else {
			args = []any{"[a-z]+", "(\\d+)", "[a-z]+", "(\\d+)", "(\\d+)"}
		}
		f := strings.ReplaceAll(regexp.QuoteMeta(t.format), "%d", "%s")
		out[i] = regexp.MustCompile("^" + fmt.Sprintf(f, args...) + "$")
	}
	return out
}

// wordProblems: templated two-step stories with a "#### n" final answer.
type wordProblems struct {
	maxNumber int
	bare      bool
}

func newWordProblems(opts Options) (*wordProblems, error) {
	m := opts.MaxNumber
	if m == 0 {
		m = 20
	}
	if m < 2 || m > 1000 {
		return nil, fmt.Errorf("%w: word problem max number = %d: must be 2..1000", ErrBadOptions, opts.MaxNumber)
	}
	return &wordProblems{maxNumber: m, bare: opts.BareAnswers}, nil
}

// Name returns "wordproblems".
func (w *wordProblems) Name() string { return "wordproblems" }

// Generate picks a template, a name and an item, and numbers in
// [1, maxNumber] ([2, 9] for bag counts and sizes), redrawing the numbers
// until no step goes below zero.
func (w *wordProblems) Generate(rng *rand.Rand) Problem {
	ti := rng.IntN(len(wordTemplates))
	t := wordTemplates[ti]
	name := wordNames[rng.IntN(len(wordNames))]
	item := wordItems[rng.IntN(len(wordItems))]
	var a, b, c int64
	for {
		if t.bags {
			a, b = 2+rng.Int64N(8), 2+rng.Int64N(8)
		} else {
			a, b = 1+rng.Int64N(int64(w.maxNumber)), 1+rng.Int64N(int64(w.maxNumber))
		}
		c = 1 + rng.Int64N(int64(w.maxNumber))
		if _, _, ok := t.steps(a, b, c); ok {
			break
		}
	}
	var prompt string
	if t.bags {
		prompt = fmt.Sprintf(t.format, name, a, b, item, c)
	} else {
		prompt = fmt.Sprintf(t.format, name, a, item, b, c)
	}
	_, r2, _ := t.steps(a, b, c)
	return Problem{Prompt: prompt, Answer: strconv.FormatInt(r2, 10)}
}

// steps returns both intermediate results; ok is false if one is negative.
func (t wordTemplate) steps(a, b, c int64) (r1, r2 int64, ok bool) {
	r1, _ = applyOp(t.ops[0], a, b)
	r2, _ = applyOp(t.ops[1], r1, c)
	return r1, r2, r1 >= 0 && r2 >= 0
}

// Verify: the completion must end (trailing spaces allowed) with "####",
// optional spaces, and an optionally signed integer, or it is Malformed;
// anything before the last "####" is a free scratchpad. It is Correct if
// that integer equals the gold answer (leading zeros ignored), else Wrong.
func (w *wordProblems) Verify(completion, answer string) Verdict {
	gold, ok := goldAnswer(answer)
	if !ok {
		return Malformed
	}
	got, ok := finalAnswer(completion)
	if !ok {
		return Malformed
	}
	if got == gold {
		return Correct
	}
	return Wrong
}

// goldAnswer is the integer of a gold answer: the answer itself, or, for
// a worked solution in GSM8K's form ("... #### 72"), the integer after its
// last "####" (thousands separators dropped: "#### 1,000" is 1000).
func goldAnswer(answer string) (string, bool) {
	if !strings.Contains(answer, finalMarker) {
		return normalInteger(strings.TrimSpace(answer))
	}
	return finalAnswer(strings.TrimRight(answer, " \n\r\t"))
}

// finalAnswer extracts the normalised integer after the last "####";
// commas in it are thousands separators ("#### 1,072" is 1072).
func finalAnswer(completion string) (string, bool) {
	i := strings.LastIndex(completion, finalMarker)
	if i < 0 {
		return "", false
	}
	return normalInteger(strings.ReplaceAll(strings.Trim(completion[i+len(finalMarker):], " "), ",", ""))
}

// normalInteger checks s is an optionally signed run of ASCII digits and
// returns it without leading zeros ("-0" becomes "0").
func normalInteger(s string) (string, bool) {
	if !isInteger(s) {
		return "", false
	}
	neg := s[0] == '-'
	s = strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
	if s == "" {
		return "0", true
	}
	if neg {
		s = "-" + s
	}
	return s, true
}

// Solution writes the scratchpad and the final answer, "3+5=8 8-2=6 #### 6",
// when the prompt matches a built-in template; otherwise (or with
// BareAnswers) just "#### 6". A gold answer that is a worked solution in
// GSM8K's form is the solution itself.
func (w *wordProblems) Solution(p Problem, _ *rand.Rand) (string, error) {
	gold, ok := goldAnswer(p.Answer)
	if !ok {
		return "", fmt.Errorf("%w: word problem answer %q is not an integer", ErrBadAnswer, p.Answer)
	}
	if strings.Contains(p.Answer, finalMarker) {
		return strings.TrimSpace(p.Answer), nil
	}
	bare := finalMarker + " " + gold
	if w.bare {
		return bare, nil
	}
	for i, re := range wordPatterns {
		m := re.FindStringSubmatch(p.Prompt)
		if m == nil {
			continue
		}
		a, errA := strconv.ParseInt(m[1], 10, 64)
		b, errB := strconv.ParseInt(m[2], 10, 64)
		c, errC := strconv.ParseInt(m[3], 10, 64)
		t := wordTemplates[i]
		r1, r2, ok := t.steps(a, b, c)
		if errA != nil || errB != nil || errC != nil || !ok || strconv.FormatInt(r2, 10) != gold {
			break
		}
		return fmt.Sprintf("%d%c%d=%d %d%c%d=%d %s", a, t.ops[0], b, r1, r1, t.ops[1], c, r2, bare), nil
	}
	return bare, nil
}

// Canonical returns the normalised final answer ("#### 06" -> "6"), so
// completions with different scratchpads but the same answer are one
// answer; a malformed completion is returned trimmed of spaces.
func (w *wordProblems) Canonical(completion string) string {
	if got, ok := finalAnswer(completion); ok {
		return got
	}
	return strings.Trim(completion, " ")
}

// ValidateAnswer requires an optionally signed integer, or a worked
// solution ending in "#### " and one (GSM8K's answer column).
func (w *wordProblems) ValidateAnswer(answer string) error {
	if _, ok := goldAnswer(answer); !ok {
		return fmt.Errorf("%w: word problem answer %q is neither an integer nor a solution ending in \"#### <integer>\"", ErrBadAnswer, answer)
	}
	return nil
}
