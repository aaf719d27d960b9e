package runlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteWarmStart(t *testing.T) {
	root := t.TempDir()
	d, err := Create(root, "warm")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{1, 2, 50} {
		if err := d.WriteWarmStart(s, map[string]float64{KeyWarmStartLoss: 1.5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteWarmStart(50, map[string]float64{KeyWarmStartLoss: 1}); !errors.Is(err, ErrBadMetrics) {
		t.Errorf("a repeated step: %v, want ErrBadMetrics", err)
	}
	recs, err := ReadMetrics(filepath.Join(d.Path(), WarmStartFile))
	if err != nil || len(recs) != 3 || recs[2].Step != 50 || recs[2].Values[KeyWarmStartLoss] != 1.5 {
		t.Errorf("read back %+v (err %v)", recs, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteWarmStart(51, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
	// A run killed during its warm start is a dead start: the name can be
	// taken again, and the old log goes.
	if err := os.Truncate(filepath.Join(d.Path(), MetricsFile), 0); err != nil {
		t.Fatal(err)
	}
	d2, err := Create(root, "warm")
	if err != nil {
		t.Fatalf("create over a run killed in its warm start: %v", err)
	}
	defer d2.Close()
	if _, err := os.Stat(filepath.Join(d2.Path(), WarmStartFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead start's warm-start log is still there (%v)", err)
	}
}
