package tasks

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustTask(t testing.TB, name string, opts Options) Task {
	t.Helper()
	task, err := New(name, opts)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return task
}

func TestCountdownVerify(t *testing.T) {
	cd := mustTask(t, "countdown", Options{})
	// Numbers and targets are hand-picked; each expected value is worked
	// out in the case name or comment.
	cases := []struct {
		name, completion, answer string
		want                     Verdict
	}{
		{"all three numbers", "7*3+9", "3,7,9>30", Correct},
		{"spaces and parentheses", " ( 9 - 7 ) * 3 * 5 ", "3,7,9,5>30", Correct},
		{"tabs around", "\t7*3+9\t", "3,7,9>30", Correct},
		{"subset is enough (at most once)", "3*9", "3,7,9>27", Correct},
		{"single number", "9", "3,7,9>9", Correct},
		{"exact division", "9/3+7", "3,7,9>10", Correct},
		{"negative intermediate", "3-7+9", "3,7,9>5", Correct},
		{"duplicate in pool used twice", "3*3+7", "3,3,7>16", Correct},
		{"deep but allowed nesting", strings.Repeat("(", 32) + "7*3+9" + strings.Repeat(")", 32), "3,7,9>30", Correct},
		{"wrong value", "7*3-9", "3,7,9>30", Wrong},
		{"number used twice", "7*3+3*3", "3,7,9>30", Wrong},
		{"number not offered", "7*3+10", "3,7,9>31", Wrong},
		{"division by zero", "9/(7-7)", "7,7,9>1", Wrong},
		{"division with remainder", "7/3*9", "3,7,9>21", Wrong},
		{"huge literal", "99999999999999999999999", "3,7,9>30", Wrong},
		{"overflow", "1000000000*1000000000*1000000000", "1000000000,1000000000,1000000000>1", Wrong},
		{"empty", "", "3,7,9>30", Malformed},
		{"spaces only", "   ", "3,7,9>30", Malformed},
		{"unary minus", "-3+7+9", "3,7,9>13", Malformed},
		{"leading zero", "07*3+9", "3,7,9>30", Malformed},
		{"trailing operator", "7*3+", "3,7,9>30", Malformed},
		{"unbalanced open", "(7*3+9", "3,7,9>30", Malformed},
		{"unbalanced close", "7*3+9)", "3,7,9>30", Malformed},
		{"empty parentheses", "()", "3,7,9>30", Malformed},
		{"too deep nesting", strings.Repeat("(", 33) + "9" + strings.Repeat(")", 33), "3,7,9>9", Malformed},
		{"very deep nesting", strings.Repeat("(", 100000), "3,7,9>9", Malformed},
		{"too long", strings.Repeat("9+", 200) + "9", "9>9", Malformed},
		{"answer tags not accepted", "<answer>7*3+9</answer>", "3,7,9>30", Malformed},
		{"equals sign", "7*3+9=30", "3,7,9>30", Malformed},
		{"letters", "seven*3+9", "3,7,9>30", Malformed},
		{"unicode junk", "7×3+9", "3,7,9>30", Malformed},
		{"unicode digits", "٧*3+9", "3,7,9>30", Malformed},
		{"invalid utf-8", "7*3+9\xff", "3,7,9>30", Malformed},
		{"decimal point", "7.0*3+9", "3,7,9>30", Malformed},
		{"newline inside", "7*3\n+9", "3,7,9>30", Malformed},
		{"bad spec: no target", "7*3+9", "3,7,9", Malformed},
		{"bad spec: letters", "7*3+9", "a,b>30", Malformed},
		{"bad spec: empty", "7*3+9", "", Malformed},
	}
	for _, tc := range cases {
		if got := cd.Verify(tc.completion, tc.answer); got != tc.want {
			t.Errorf("%s: Verify(%q, %q) = %v, want %v", tc.name, tc.completion, tc.answer, got, tc.want)
		}
	}
}

func TestCountdownCanonical(t *testing.T) {
	cd := mustTask(t, "countdown", Options{})
	cases := []struct{ in, want string }{
		{"7*3+9", "7*3+9"},
		{" ( 7 * 3 ) + 9 ", "7*3+9"},
		{"((7*3)+9)", "7*3+9"},
		{"7*(3+9)", "7*(3+9)"},
		{"9-(7-3)", "9-(7-3)"}, // right operand of '-' keeps parentheses
		{"(9-7)-3", "9-7-3"},   // left-associative: no parentheses needed
		{"9+(7+3)", "9+(7+3)"}, // same tree kept: (9+7)+3 is a different tree
		{"9*(7/3)", "9*(7/3)"}, // ... and here a different value rule
		{"9+7*3", "9+7*3"},     // operand order kept
		{"9 + 7 +", "9+7+"},    // malformed: spaces removed only
		{"", ""},
	}
	for _, tc := range cases {
		if got := cd.Canonical(tc.in); got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseSpec(t *testing.T) {
	nums, target, err := parseSpec("3,7,9>30")
	if err != nil || len(nums) != 3 || nums[0] != 3 || nums[1] != 7 || nums[2] != 9 || target != 30 {
		t.Fatalf("parseSpec(3,7,9>30) = %v, %d, %v", nums, target, err)
	}
	for _, bad := range []string{"", ">", "3,7>", ">30", "3,,7>30", "3,7>30>1", "+3,7>30", "-3,7>30",
		"3,7>1e3", "3,7>99999999999", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17>1", " 3,7>30"} {
		if _, _, err := parseSpec(bad); !errors.Is(err, ErrBadAnswer) {
			t.Errorf("parseSpec(%q) error = %v, want ErrBadAnswer", bad, err)
		}
	}
}

func TestApplyOpOverflow(t *testing.T) {
	const maxI, minI = int64(^uint64(0) >> 1), -int64(^uint64(0)>>1) - 1
	cases := []struct {
		op     byte
		a, b   int64
		want   int64
		wantOK bool
	}{
		{'+', maxI, 1, 0, false},
		{'+', maxI, 0, maxI, true},
		{'+', minI, -1, 0, false},
		{'-', minI, 1, 0, false},
		{'-', 0, minI, 0, false},
		{'-', -1, minI, maxI, true},
		{'*', 1 << 32, 1 << 31, 0, false},
		{'*', 1 << 31, 1 << 31, 1 << 62, true},
		{'*', -1, minI, 0, false},
		{'*', minI, -1, 0, false},
		{'/', minI, -1, 0, false},
		{'/', 12, 4, 3, true},
		{'/', -12, 4, -3, true},
		{'/', 12, 5, 0, false},
		{'/', 12, 0, 0, false},
		{'%', 1, 1, 0, false},
	}
	for _, tc := range cases {
		got, ok := applyOp(tc.op, tc.a, tc.b)
		if ok != tc.wantOK || (ok && got != tc.want) {
			t.Errorf("applyOp(%c, %d, %d) = %d, %v, want %d, %v", tc.op, tc.a, tc.b, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestCountdownGenerateReachable(t *testing.T) {
	// Every generated target is in range, not one of the numbers, and the
	// solver reaches it with the numbers given, for 3 and 4 numbers.
	for _, tc := range []struct {
		opts Options
		n    int // problems to check; six numbers are slow to solve
	}{{Options{}, 300}, {Options{Numbers: 4}, 300}, {Options{Ops: "+-*"}, 300}, {Options{Numbers: 6, MaxNumber: 10}, 20}} {
		opts := tc.opts
		cd := mustTask(t, "countdown", opts)
		c := cd.(*countdown)
		rng := rand.New(rand.NewPCG(7, 7))
		for i := range tc.n {
			p := cd.Generate(rng)
			nums, target, err := parseSpec(p.Answer)
			if err != nil {
				t.Fatalf("%+v problem %d: bad spec %q: %v", opts, i, p.Answer, err)
			}
			if p.Prompt != p.Answer+":" || len(nums) != c.numbers || target < 1 || target > int64(c.maxTarget) {
				t.Fatalf("%+v problem %d: %+v out of range", opts, i, p)
			}
			for _, n := range nums {
				if n < 1 || n > int64(c.maxNumber) {
					t.Fatalf("%+v problem %d: number %d out of [1, %d]", opts, i, n, c.maxNumber)
				}
			}
			s, err := cd.Solution(p, rng)
			if err != nil {
				t.Fatalf("%+v problem %d %q: %v", opts, i, p.Answer, err)
			}
			if v := cd.Verify(s, p.Answer); v != Correct {
				t.Fatalf("%+v problem %d %q: solution %q is %v", opts, i, p.Answer, s, v)
			}
		}
	}
}

func TestCountdownSolutionsVary(t *testing.T) {
	// "1,2,3,4>10" has many solutions (1+2+3+4, 2*3+4, 4*3-2, ...); the
	// solver should not always return the same one.
	cd := mustTask(t, "countdown", Options{})
	p := Problem{Prompt: "1,2,3,4>10:", Answer: "1,2,3,4>10"}
	rng := rand.New(rand.NewPCG(1, 1))
	seen := map[string]bool{}
	for range 50 {
		s, err := cd.Solution(p, rng)
		if err != nil || cd.Verify(s, p.Answer) != Correct {
			t.Fatalf("Solution = %q, %v", s, err)
		}
		seen[cd.Canonical(s)] = true
	}
	if len(seen) < 5 {
		t.Errorf("50 solutions of %q gave %d distinct forms %v, want at least 5", p.Answer, len(seen), seen)
	}
}

func TestCountdownNoSolution(t *testing.T) {
	cd := mustTask(t, "countdown", Options{})
	rng := rand.New(rand.NewPCG(1, 1))
	// 1,1>5: the values reachable are 1, 2, 0, 1 only.
	if _, err := cd.Solution(Problem{Answer: "1,1>5"}, rng); !errors.Is(err, ErrNoSolution) {
		t.Errorf("Solution(1,1>5) error = %v, want ErrNoSolution", err)
	}
	if _, err := cd.Solution(Problem{Answer: "junk"}, rng); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("Solution(junk) error = %v, want ErrBadAnswer", err)
	}
	// Sixteen numbers and an unreachable target: the search budget ends it.
	big := "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1>999999999"
	if _, err := cd.Solution(Problem{Answer: big}, rng); !errors.Is(err, ErrNoSolution) {
		t.Errorf("Solution(%s) error = %v, want ErrNoSolution", big, err)
	}
}

func TestExprPrintRoundTrip(t *testing.T) {
	// Printing any parsed tree and parsing it again gives the same print.
	for _, s := range []string{"1", "1+2", "1-(2-3)", "(1-2)-3", "1*(2/3)", "(1+2)*(3-4)/5", "((((7))))", "1/(2*3)", "1-(2+3)*4"} {
		tree, err := parseExpr(s)
		if err != nil {
			t.Fatalf("parseExpr(%q): %v", s, err)
		}
		again, err := parseExpr(tree.String())
		if err != nil || again.String() != tree.String() {
			t.Errorf("%q printed %q reparsed %v printed %q", s, tree, err, again)
		}
	}
}
