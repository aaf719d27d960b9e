package runlog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFinalEvalRoundTrip: what WriteFinalEval records ReadFinalEval reads
// back; no file is fs.ErrNotExist, and a file no run writes (an accuracy
// above 1, not JSON) is ErrBadMetrics.
func TestFinalEvalRoundTrip(t *testing.T) {
	d, err := Create(t.TempDir(), "run")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := ReadFinalEval(d.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no file: err %v, want fs.ErrNotExist", err)
	}
	acc := 0.25
	for _, want := range []FinalEval{
		{Step: 4, GreedyAccuracy: &acc, Problems: 8},
		{Step: 4, NotMeasured: "evaluate addition: greedy: out of memory"},
	} {
		if err := d.WriteFinalEval(want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFinalEval(d.Path())
		if err != nil || got.Step != want.Step || got.Problems != want.Problems || got.NotMeasured != want.NotMeasured ||
			(got.GreedyAccuracy == nil) != (want.GreedyAccuracy == nil) || got.GreedyAccuracy != nil && *got.GreedyAccuracy != *want.GreedyAccuracy {
			t.Errorf("ReadFinalEval = %+v, %v; want %+v", got, err, want)
		}
	}
	for _, text := range []string{`{"step":4,"greedy_accuracy":1.5}`, `{"step":-1}`, `{"step":4`} {
		if err := os.WriteFile(filepath.Join(d.Path(), FinalEvalFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFinalEval(d.Path()); !errors.Is(err, ErrBadMetrics) {
			t.Errorf("%s: err %v, want ErrBadMetrics", text, err)
		}
	}
}

// TestResumeDropsALaterFinalEval: a resume from step 2 removes the final
// evaluation of step 4, whose policy the resumed run trains again (a run
// killed after the new step-4 checkpoint would otherwise pass for done),
// and keeps one of step 2 or before.
func TestResumeDropsALaterFinalEval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		final int
		kept  bool
	}{
		{"later step", 4, false},
		{"the resumed step", 2, true},
		{"an earlier step", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Create(t.TempDir(), "run")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for s := 1; s <= 4; s++ {
				if err := d.WriteMetrics(s, map[string]float64{"train/reward": float64(s)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.WriteFinalEval(FinalEval{Step: tc.final, NotMeasured: "x"}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Resume(2); err != nil {
				t.Fatal(err)
			}
			_, err = ReadFinalEval(d.Path())
			if kept := err == nil; kept != tc.kept {
				t.Errorf("final evaluation of step %d after Resume(2): kept %v (%v), want %v", tc.final, kept, err, tc.kept)
			}
		})
	}
}
