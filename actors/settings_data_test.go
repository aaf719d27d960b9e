package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// TestSettingsHeldOutRows: with task.eval_fraction the evaluations draw
// from rows that training never sees; without it from the training rows.
func TestSettingsHeldOutRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sums.jsonl")
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "{\"question\": \"%d+%d=\", \"solution\": %d}\n", i, i, 2*i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Task.Dataset, cfg.Task.EvalFraction = path, 0.25
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := testSettings(t, cfg)
	train, eval := s.step.task.(*tasks.Dataset), s.eval.task.(*tasks.Dataset)
	if train.Len() != 30 || eval.Len() != 10 {
		t.Fatalf("train %d rows, eval %d, want 30 and 10", train.Len(), eval.Len())
	}
	seen := map[string]bool{}
	for i := range train.Len() {
		seen[train.At(i).Prompt] = true
	}
	for i := range eval.Len() {
		if seen[eval.At(i).Prompt] {
			t.Errorf("held-out %q is a training row", eval.At(i).Prompt)
		}
	}
	cfg.Task.EvalFraction = 0
	if s2 := testSettings(t, cfg); s2.eval.task != s2.step.task {
		t.Error("without a held-out split eval should draw from the training rows")
	}
}
