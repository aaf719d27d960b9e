package rewards

import (
	"errors"
	"strings"
	"testing"
)

func TestCompletionLengths(t *testing.T) {
	st, err := CompletionLengths([]int{4, 10, 6, 10}, []bool{false, true, false, true})
	if err != nil {
		t.Fatal(err)
	}
	want := LengthStats{MeanSampled: 7.5, MinSampled: 4, MaxSampled: 10, ClippedFrac: 0.5, MeanTerminated: 5, MinTerminated: 4, MaxTerminated: 6}
	if st != want {
		t.Errorf("lengths = %+v, want %+v", st, want)
	}
	// all clipped: terminated stats 0, clipped_frac 1 (clamped to [0,1], spec §6).
	st, _ = CompletionLengths([]int{5, 5}, []bool{true, true})
	if st.ClippedFrac != 1 || st.MeanTerminated != 0 || st.MaxTerminated != 0 {
		t.Errorf("all clipped: %+v", st)
	}
	if st, err := CompletionLengths(nil, nil); err != nil || st != (LengthStats{}) {
		t.Errorf("empty: %+v %v", st, err)
	}
	if _, err := CompletionLengths([]int{1}, nil); !errors.Is(err, ErrShape) {
		t.Errorf("missing flags: err = %v", err)
	}
}

// words splits each text into whitespace tokens (the original's fallback).
func words(texts ...string) [][]string {
	out := make([][]string, len(texts))
	for i, t := range texts {
		out[i] = strings.Fields(t)
	}
	return out
}

func TestDiversity(t *testing.T) {
	// want is {distinct_1, distinct_2, jaccard}; the original's micro forms
	// weight per-group values by group size, which is K for every group, so
	// each micro value equals its plain mean.
	tests := []struct {
		name  string
		texts [][]string
		k     int
		want  [3]float64
	}{
		// concatenation "a b a a b": unigrams 2/5, bigrams {ab,ba,aa}/4 (ba
		// and aa cross the boundary); both sets {a,b}: distance 0.
		{"bigrams cross completions", words("a b a", "a b"), 2, [3]float64{2.0 / 5, 3.0 / 4, 0}},
		// g1 as above; g2 "x x x x x x y": 2/7, {xx,xy}/6, {x} vs {y}: 1.
		// distinct_1 = (2/5 + 2/7)/2 = 12/35 (pooled counts would give 4/12).
		{"mean of group values", words("a b a", "a b", "x x x x x x", "y"), 2,
			[3]float64{12.0 / 35, (3.0/4 + 2.0/6) / 2, 0.5}},
		// g1 has no tokens and counts as 0; g2 "a b c d": 4/4, 3/3, disjoint 1.
		{"empty group counts 0", words("", "", "a b", "c d"), 2, [3]float64{0.5, 0.5, 0.5}},
		// sets {a,b},{b,c},{a,b}: pairs 1-1/3, 0, 1-1/3 -> 4/9;
		// "a b b c a b": 3/6, {ab,bb,bc,ca}/5.
		{"jaccard of three", words("a b", "b c", "a b"), 3, [3]float64{0.5, 4.0 / 5, 4.0 / 9}},
		// g1 {a,b} vs {a,b,c}: 1-2/3; g2 {} vs {d}: 1 -> jaccard (1/3+1)/2;
		// g1 "a b a b c" 3/5, {ab,ba,bc}/4; g2 "d" 1/1, no bigram 0.
		{"jaccard with an empty set", words("a b", "a b c", "", "d"), 2,
			[3]float64{(3.0/5 + 1) / 2, (3.0 / 4) / 2, (1.0/3 + 1) / 2}},
		// K = 1: no pairs, jaccard 0; "a a" 1/2, {aa}/1; "b c" 1, 1.
		{"one completion per group", words("a a", "b c"), 1, [3]float64{0.75, 1, 0}},
		{"no tokens", words("", ""), 1, [3]float64{}},
	}
	for _, tt := range tests {
		st, err := Diversity(tt.texts, tt.k)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := [6]float64{st.Distinct1, st.Distinct2, st.Jaccard, st.Distinct1Micro, st.Distinct2Micro, st.JaccardMicro}
		for i, g := range got {
			if !near(g, tt.want[i%3], 1e-12) {
				t.Errorf("%s: %s = %v, want %v", tt.name, diversityKeys[i], g, tt.want[i%3])
			}
		}
	}
	if _, err := Diversity([][]int{{1}}, 0); !errors.Is(err, ErrEmptyGroup) {
		t.Errorf("K=0: err = %v", err)
	}
}

// diversityKeys name the values TestDiversity checks, in its order.
var diversityKeys = [6]string{"distinct_1", "distinct_2", "jaccard", "distinct_1_micro", "distinct_2_micro", "jaccard_micro"}
