package rewards

import (
	"errors"
	"strings"
	"testing"
)

func TestCompletionLengths(t *testing.T) {
	st, err := CompletionLengths([]int{4, 10, 6, 10}, TruncatedByLength([]int{4, 10, 6, 10}, 10))
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

func TestDiversity(t *testing.T) {
	// group 1: "a b" and "a b" (identical); group 2: "a b c" and "d" (disjoint).
	c := [][]string{strings.Fields("a b"), strings.Fields("a b"), strings.Fields("a b c"), strings.Fields("d")}
	st, err := Diversity(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		// distinct-1: g1 2/4, g2 4/4 -> macro .75, micro 6/8.
		{"distinct_1", st.Distinct1, 0.75},
		{"distinct_1_micro", st.Distinct1Micro, 0.75},
		// distinct-2: g1 {ab}/2 = .5, g2 {ab,bc}/2 = 1 -> macro .75, micro 3/4.
		{"distinct_2", st.Distinct2, 0.75},
		{"distinct_2_micro", st.Distinct2Micro, 0.75},
		// jaccard distance: g1 0, g2 1 -> .5.
		{"jaccard", st.Jaccard, 0.5},
		{"jaccard_micro", st.JaccardMicro, 0.5},
	}
	for _, ck := range checks {
		if !near(ck.got, ck.want, 1e-12) {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	// micro differs from macro when n-gram counts differ: g1 2 unigrams all distinct, g2 4 identical.
	st, _ = Diversity([][]int{{1}, {2}, {7, 7}, {7, 7}}, 2)
	if !near(st.Distinct1, (1+0.25)/2, 1e-12) || !near(st.Distinct1Micro, 3.0/6, 1e-12) {
		t.Errorf("distinct_1 macro %v micro %v", st.Distinct1, st.Distinct1Micro)
	}
	// K = 1 has no pairs; empty completions have no n-grams.
	if st, err := Diversity([][]int{{}, {}}, 1); err != nil || st != (DiversityStats{}) {
		t.Errorf("K=1 empty: %+v %v", st, err)
	}
	if _, err := Diversity([][]int{{1}}, 0); !errors.Is(err, ErrEmptyGroup) {
		t.Errorf("K=0: err = %v", err)
	}
}
