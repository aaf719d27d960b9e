package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// TestEvalTaskHeldOut: eval draws from the held-out rows of a run's split
// (the rows training did not see), and from all rows without a split.
func TestEvalTaskHeldOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sums.jsonl")
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "{\"q\": \"%d+%d=\", \"a\": \"%d\"}\n", i, i, 2*i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	a := evalArgs{task: "addition", dataset: path,
		source: tasks.Source{Fields: tasks.Fields{Prompt: "q", Answer: "a"}, EvalFraction: 0.25, Seed: 1}}
	held, err := evalTask(a)
	if err != nil {
		t.Fatal(err)
	}
	train, want, err := tasks.OpenDatasets(tasks.Source{Path: path, Fields: a.source.Fields, EvalFraction: 0.25, Seed: 1}, "addition", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := held.(*tasks.Dataset)
	if d.Len() != want.Len() || d.At(0) != want.At(0) || d.Len() == train.Len() {
		t.Fatalf("eval set of %d rows starting %v, want the %d held-out rows starting %v", d.Len(), d.At(0), want.Len(), want.At(0))
	}
	a.source.EvalFraction = 0
	all, err := evalTask(a)
	if err != nil || all.(*tasks.Dataset).Len() != 40 {
		t.Fatalf("without a split: %v, %v", all, err)
	}
}
