package tasks

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestNewNamesAndAliases(t *testing.T) {
	if got, want := Names(), []string{"addition", "countdown", "wordproblems"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for alias, want := range map[string]string{
		"addition": "addition", "add": "addition", " Addition ": "addition",
		"countdown": "countdown", "countdown-lite": "countdown", "countdown_lite": "countdown", "COUNTDOWN": "countdown",
		"wordproblems": "wordproblems", "word_problems": "wordproblems", "word-problems": "wordproblems", "words": "wordproblems",
	} {
		task, err := New(alias, Options{})
		if err != nil || task.Name() != want {
			t.Errorf("New(%q) = %v, %v, want task %q", alias, task, err, want)
		}
	}
}

func TestNewUnknown(t *testing.T) {
	_, err := New("gsm8k", Options{})
	if !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("New(gsm8k) error = %v, want ErrUnknownTask", err)
	}
	want := `tasks: unknown task "gsm8k" (known: addition (aliases: add), countdown (aliases: countdown-lite, countdown_lite), wordproblems (aliases: word-problems, word_problems, words))`
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

func TestNewBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts Options
	}{
		{"addition", Options{Digits: 19}},
		{"countdown", Options{Numbers: 1}},
		{"countdown", Options{Numbers: 7}},
		{"countdown", Options{MaxNumber: -1}},
		{"countdown", Options{MaxNumber: 1001}},
		{"countdown", Options{MaxNumber: 20, MaxTarget: 39}},
		{"countdown", Options{Ops: "*-"}},
		{"countdown", Options{Ops: "++"}},
		{"countdown", Options{Ops: "+^"}},
		{"wordproblems", Options{MaxNumber: 1}},
	}
	for _, tc := range cases {
		if _, err := New(tc.name, tc.opts); !errors.Is(err, ErrBadOptions) {
			t.Errorf("New(%s, %+v) error = %v, want ErrBadOptions", tc.name, tc.opts, err)
		}
	}
}

func TestVerdict(t *testing.T) {
	cases := []struct {
		v          Verdict
		name       string
		acc        float64 // the issue: 1 correct, 0.1 well formed but wrong, 0 otherwise
		wellFormed bool
	}{
		{Malformed, "malformed", 0, false},
		{Wrong, "wrong", 0.1, true},
		{Correct, "correct", 1, true},
		{TimedOut, "timed_out", 0, false},
		{Verdict(9), "verdict(9)", 0, false},
	}
	for _, tc := range cases {
		if tc.v.String() != tc.name || tc.v.Accuracy() != tc.acc || tc.v.WellFormed() != tc.wellFormed {
			t.Errorf("%d: got %q %v %v, want %q %v %v", int(tc.v), tc.v, tc.v.Accuracy(), tc.v.WellFormed(), tc.name, tc.acc, tc.wellFormed)
		}
	}
}

// generatorCases are the configurations whose problems must fit the
// policy's context with their solutions.
var generatorCases = []struct {
	name string
	opts Options
}{
	{"addition", Options{}},
	{"addition", Options{Digits: 3, Reverse: true}},
	{"countdown", Options{}},
	{"countdown", Options{Numbers: 4}},
	{"countdown", Options{Ops: "+-*"}},
	{"wordproblems", Options{}},
	{"wordproblems", Options{BareAnswers: true}},
}

func TestGenerateSameSeedSameProblems(t *testing.T) {
	for _, tc := range generatorCases {
		task := mustTask(t, tc.name, tc.opts)
		a := Batch(task, rand.New(rand.NewPCG(42, 1)), 200)
		b := Batch(task, rand.New(rand.NewPCG(42, 1)), 200)
		c := Batch(task, rand.New(rand.NewPCG(43, 1)), 200)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s %+v: same seed gave different problems", tc.name, tc.opts)
		}
		if reflect.DeepEqual(a, c) {
			t.Errorf("%s %+v: seeds 42 and 43 gave the same 200 problems", tc.name, tc.opts)
		}
	}
}

func TestGeneratedSolutionsVerifyAndFit(t *testing.T) {
	for _, tc := range generatorCases {
		task := mustTask(t, tc.name, tc.opts)
		rng := rand.New(rand.NewPCG(5, 9))
		distinct := map[string]bool{}
		for i := range 2000 {
			p := task.Generate(rng)
			distinct[p.Prompt] = true
			s, err := task.Solution(p, rng)
			if err != nil {
				t.Fatalf("%s %+v problem %d %+v: %v", tc.name, tc.opts, i, p, err)
			}
			if v := task.Verify(s, p.Answer); v != Correct {
				t.Fatalf("%s %+v problem %d %+v: solution %q is %v", tc.name, tc.opts, i, p, s, v)
			}
			if n := len(p.Prompt) + len(s); n > MaxChars {
				t.Fatalf("%s %+v: %q + %q is %d characters, more than %d", tc.name, tc.opts, p.Prompt, s, n, MaxChars)
			}
			if !printableASCII(p.Prompt + s) {
				t.Fatalf("%s %+v: %q + %q is not printable ASCII", tc.name, tc.opts, p.Prompt, s)
			}
		}
		if len(distinct) < 500 {
			t.Errorf("%s %+v: only %d distinct prompts in 2000", tc.name, tc.opts, len(distinct))
		}
	}
}

func printableASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' })
}
