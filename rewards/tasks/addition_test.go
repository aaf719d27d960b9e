package tasks

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestAdditionVerify(t *testing.T) {
	add := mustTask(t, "addition", Options{})
	// The rule: the text before EOS must equal the sum exactly.
	cases := []struct {
		name, completion, answer string
		want                     Verdict
	}{
		{"correct", "82", "82", Correct},
		{"wrong number", "81", "82", Wrong},
		{"leading zero is wrong", "082", "82", Wrong},
		{"negative number is well formed", "-82", "82", Wrong},
		{"huge number is well formed", "123456789012345678901234567890", "82", Wrong},
		{"trailing space", "82 ", "82", Malformed},
		{"leading space", " 82", "82", Malformed},
		{"empty", "", "82", Malformed},
		{"minus only", "-", "82", Malformed},
		{"expression", "80+2", "82", Malformed},
		{"unicode digits", "٨٢", "82", Malformed},
		{"bad gold answer", "x", "x", Malformed},
		{"bad gold, number completion", "82", "x", Wrong},
	}
	for _, tc := range cases {
		if got := add.Verify(tc.completion, tc.answer); got != tc.want {
			t.Errorf("%s: Verify(%q, %q) = %v, want %v", tc.name, tc.completion, tc.answer, got, tc.want)
		}
	}
}

func TestAdditionGenerate(t *testing.T) {
	// 37+45=82: with Reverse the answer is written "28".
	for _, tc := range []struct {
		opts   Options
		digits int
	}{{Options{}, 2}, {Options{Digits: 3}, 3}, {Options{Digits: 1, Reverse: true}, 1}, {Options{Digits: 18}, 18}} {
		add := mustTask(t, "addition", tc.opts)
		rng := rand.New(rand.NewPCG(3, 3))
		for range 200 {
			p := add.Generate(rng)
			x, y, err := parseAddition(p.Prompt)
			if err != nil {
				t.Fatalf("%+v: prompt %q: %v", tc.opts, p.Prompt, err)
			}
			if len(itoa(x)) > tc.digits || len(itoa(y)) > tc.digits {
				t.Fatalf("%+v: prompt %q has more than %d digits", tc.opts, p.Prompt, tc.digits)
			}
			want := itoa(x + y)
			if tc.opts.Reverse {
				want = reverseString(want)
			}
			if p.Answer != want {
				t.Fatalf("%+v: %q answer %q, want %q", tc.opts, p.Prompt, p.Answer, want)
			}
		}
	}
}

func TestAdditionOptions(t *testing.T) {
	for _, d := range []int{-1, 19} {
		if _, err := New("addition", Options{Digits: d}); !errors.Is(err, ErrBadOptions) {
			t.Errorf("Digits %d: error = %v, want ErrBadOptions", d, err)
		}
	}
}

func TestWordProblemsVerify(t *testing.T) {
	wp := mustTask(t, "wordproblems", Options{})
	cases := []struct {
		name, completion, answer string
		want                     Verdict
	}{
		{"bare answer", "#### 6", "6", Correct},
		{"scratchpad", "3+5=8 8-2=6 #### 6", "6", Correct},
		{"no space after marker", "####6", "6", Correct},
		{"trailing spaces", "#### 6  ", "6", Correct},
		{"leading zeros", "#### 006", "6", Correct},
		{"last marker counts", "#### 5 #### 6", "6", Correct},
		{"gold with leading zero", "#### 6", "06", Correct},
		{"negative zero", "#### -0", "0", Correct},
		{"wrong number", "3+5=8 8-2=7 #### 7", "6", Wrong},
		{"huge number", "#### 123456789012345678901234567890", "6", Wrong},
		{"no marker", "6", "6", Malformed},
		{"three hashes", "### 6", "6", Malformed},
		{"text after answer", "#### 6 pens", "6", Malformed},
		{"newline after answer", "#### 6\n", "6", Malformed},
		{"empty answer", "####", "6", Malformed},
		{"decimal", "#### 6.0", "6", Malformed},
		{"unicode junk", "#### ６", "6", Malformed},
		{"bad gold", "#### 6", "six", Malformed},
	}
	for _, tc := range cases {
		if got := wp.Verify(tc.completion, tc.answer); got != tc.want {
			t.Errorf("%s: Verify(%q, %q) = %v, want %v", tc.name, tc.completion, tc.answer, got, tc.want)
		}
	}
}

func TestWordProblemsSolution(t *testing.T) {
	wp := mustTask(t, "wordproblems", Options{})
	bare := mustTask(t, "wordproblems", Options{BareAnswers: true})
	// ann: 3 + 5 = 8, 8 - 2 = 6.
	p := Problem{Prompt: "ann has 3 pens, gets 5, loses 2:", Answer: "6"}
	cases := []struct {
		task Task
		p    Problem
		want string
	}{
		{wp, p, "3+5=8 8-2=6 #### 6"},
		{bare, p, "#### 6"},
		// 4 bags of 6 = 24, 24 + 7 = 31.
		{wp, Problem{Prompt: "bob has 4 bags of 6 cups, gets 7:", Answer: "31"}, "4*6=24 24+7=31 #### 31"},
		// Unknown prompt (a dataset line): only the final answer.
		{wp, Problem{Prompt: "what is six?", Answer: "6"}, "#### 6"},
		// Template matches but the gold disagrees: do not invent a scratchpad.
		{wp, Problem{Prompt: p.Prompt, Answer: "7"}, "#### 7"},
	}
	for _, tc := range cases {
		got, err := tc.task.Solution(tc.p, nil)
		if err != nil || got != tc.want {
			t.Errorf("Solution(%+v) = %q, %v, want %q", tc.p, got, err, tc.want)
		}
	}
	if _, err := wp.Solution(Problem{Answer: "six"}, nil); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("Solution(six) error = %v, want ErrBadAnswer", err)
	}
}

func TestWordProblemsCanonical(t *testing.T) {
	wp := mustTask(t, "wordproblems", Options{})
	cases := []struct{ in, want string }{
		{"3+5=8 8-2=6 #### 6", "6"},
		{"#### 006", "6"},
		{" no answer ", "no answer"},
	}
	for _, tc := range cases {
		if got := wp.Canonical(tc.in); got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
