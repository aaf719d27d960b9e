package rewards

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestExtractAnswer(t *testing.T) {
	tests := []struct {
		text string
		want string
		ok   bool
	}{
		// spec §1.5 test vector completions.
		{`The answer is \boxed{3}.`, "3", true},
		{`Also \boxed{3}.`, "3", true},
		{`Unsure.`, "", false},
		// last boxed wins, braces matched.
		{`\boxed{1} then \boxed{\frac{1}{2}}`, `\frac{1}{2}`, true},
		{`\fbox{7}`, "7", true},
		{`\boxed{2} and \fbox{9}`, "9", true},
		// bare form up to whitespace or punctuation.
		{`so \boxed 42, done`, "42", true},
		{`so \boxed 42.`, "42", true},
		{"so \\boxed \u00a042\u2004more", "42", true}, // Unicode spaces count as whitespace
		{"\\boxed \u2004", "", false},
		// <answer> tags when there is no boxed payload.
		{"<think>x</think><answer> 12 </answer>", "12", true},
		{"<answer>1</answer><answer>2</answer>", "1", true},
		// unbalanced or empty payloads count as missing.
		{`\boxed{3`, "", false},
		{`\boxed{}`, "", false},
		{`\boxed{ } <answer>5</answer>`, "5", true},
		{`\boxed{4} \boxed{`, "4", true},
		{`\boxedx`, "", false},
		// the original: whitespace may separate \boxed from its brace group,
		// and the answer tags match in any case.
		{`\boxed {7}`, "7", true},
		{"\\fbox\t\n{ 8 }.", "8", true},
		{`\boxed  {7`, "", false},
		{`<ANSWER>6</Answer>`, "6", true},
		{"<aNſwer>5</answer>", "5", true}, // ſ folds to s, as Python's re.IGNORECASE
		{`<answer>1</answer> \boxed {2}`, "2", true},
		{"<answer>unterminated", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := ExtractAnswer(tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ExtractAnswer(%q) = (%q, %v), want (%q, %v)", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzExtractAnswer(f *testing.F) {
	for _, s := range []string{`The answer is \boxed{3}.`, `\boxed{\frac{1}{2}}`, `\fbox{x}`, `\boxed 4!`,
		"<answer>7</answer>", `\boxed{{{}`, `\boxed{}}}`, "\\boxed", "<answer></answer>", "é\\boxed{ü}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ExtractAnswer(s)
		if !ok && a != "" {
			t.Fatalf("ExtractAnswer(%q) = (%q, false): want empty answer when not found", s, a)
		}
		if ok && (a == "" || !strings.Contains(s, a)) {
			t.Fatalf("ExtractAnswer(%q) = %q: want a non-empty substring of the input", s, a)
		}
		if ok && strings.TrimSpace(a) != a {
			t.Fatalf("ExtractAnswer(%q) = %q: want trimmed", s, a)
		}
		if utf8.ValidString(s) && !utf8.ValidString(a) {
			t.Fatalf("ExtractAnswer(%q) = %q: invalid UTF-8 from valid input", s, a)
		}
	})
}

func TestSemanticIDs(t *testing.T) {
	tests := []struct {
		name    string
		answers []string
		found   []bool
		want    []int
	}{
		{name: "first-seen order", answers: []string{"b", "a", "b"}, found: []bool{true, true, true}, want: []int{0, 1, 0}},
		// spec §1.5 step 2: every missing answer gets its own fresh id.
		{name: "missing are own clusters", answers: []string{"3", "", "3", ""}, found: []bool{true, false, true, false}, want: []int{0, 1, 0, 2}},
		// spec §6 "all-missing answers treated as unique clusters".
		{name: "all missing", answers: []string{"", "", ""}, found: []bool{false, false, false}, want: []int{0, 1, 2}},
	}
	for _, tc := range tests {
		got, err := SemanticIDs(tc.answers, tc.found)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: ids = %v, %v; want %v", tc.name, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: ids = %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}

// TestSeedVector is the SEED statistics test vector of
// tests/rewards/test_training_rewards_helpers.py (spec §1.5).
func TestSeedVector(t *testing.T) {
	completions := []string{`The answer is \boxed{3}.`, `Also \boxed{3}.`, `Unsure.`}
	cfg := DefaultSeedGRPO()
	cfg.Enabled, cfg.NumGenerations = true, 4
	st, err := SeedScales(completions, []float64{-1, -2, -3}, []int{1, 1, 1}, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	z := math.Exp(-1) + math.Exp(-2) + math.Exp(-3)
	p1, p2 := (math.Exp(-1)+math.Exp(-2))/z, math.Exp(-3)/z
	wantH := -(p1*math.Log(p1) + p2*math.Log(p2))
	wantAlpha := 0.0417 / math.Log(4)
	if !near(st.Entropy[0], wantH, 1e-12) {
		t.Errorf("semantic entropy = %v, want %v", st.Entropy[0], wantH)
	}
	if !near(st.AlphaEffective, wantAlpha, 1e-15) {
		t.Errorf("alpha_eff = %v, want %v", st.AlphaEffective, wantAlpha)
	}
	if want := 1 / (1 + wantAlpha*wantH); !near(st.Scale[0], want, 1e-12) {
		t.Errorf("scale = %v, want %v", st.Scale[0], want)
	}
	if !near(st.MaxPossibleEntropy, math.Log(4), 1e-15) {
		t.Errorf("max possible entropy = %v, want ln 4", st.MaxPossibleEntropy)
	}
}

func TestSeedDefaultRange(t *testing.T) {
	// spec §1.5 / §8 quirk 10: defaults with G = 8 give α_eff = 0.02005 and
	// scales in [1/1.0417, 1].
	cfg := DefaultSeedGRPO()
	a := cfg.AlphaEffective(8)
	if !near(a, 0.02005, 5e-6) {
		t.Errorf("alpha_eff(G=8) = %v, want 0.02005", a)
	}
	if s := SeedScale(math.Log(8), a); !near(s, 1/1.0417, 1e-12) {
		t.Errorf("scale at max entropy = %v, want 1/1.0417", s)
	}
	if s := SeedScale(0, a); s != 1 {
		t.Errorf("scale at zero entropy = %v, want 1", s)
	}
	if a := (SeedGRPO{Alpha: 0.3, NormalizeByMaxEntropy: true}).AlphaEffective(1); a != 0.3 {
		t.Errorf("alpha_eff(G=1) = %v, want alpha unnormalised", a)
	}
}

func TestSemanticEntropyEdges(t *testing.T) {
	tests := []struct {
		name string
		ids  []int
		ll   []float64
		want float64
	}{
		{name: "one cluster", ids: []int{0, 0}, ll: []float64{-1, -5}, want: 0},
		{name: "two equal clusters", ids: []int{0, 1}, ll: []float64{-2, -2}, want: math.Ln2},
		{name: "NaN left out", ids: []int{0, 1, 2}, ll: []float64{-2, -2, math.NaN()}, want: math.Ln2},
		{name: "all non-finite", ids: []int{0, 1}, ll: []float64{math.NaN(), math.Inf(1)}, want: 0},
		{name: "empty", ids: nil, ll: nil, want: 0},
		{name: "-Inf has no mass", ids: []int{0, 1}, ll: []float64{-1, math.Inf(-1)}, want: 0},
	}
	for _, tc := range tests {
		got, err := SemanticEntropy(tc.ids, tc.ll)
		if err != nil || !near(got, tc.want, 1e-12) {
			t.Errorf("%s: H = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
