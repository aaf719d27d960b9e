package gpu

import (
	"errors"
	"runtime/metrics"
	"strings"
	"testing"
)

// TestCheckMemoryCountsOwnHeap: the check counts the heap this process
// holds without objects as available to it, and collects its garbage
// before it refuses, so a step is never skipped for memory the process
// holds itself (the run skipped steps 37, 39 and 40 with 2.1 GB
// "available" while its own heap held 11 GB it no longer used).
func TestCheckMemoryCountsOwnHeap(t *testing.T) {
	const gb = int64(1e9)
	for _, tc := range []struct {
		name     string
		readings []MemoryReading // before and after the collection
		need     int64
		collects int
		refused  string // "" when it passes
	}{
		{"machine enough", []MemoryReading{{Machine: 4 * gb, Known: true}}, 3 * gb, 0, ""},
		{"own free heap", []MemoryReading{{Machine: 2 * gb, Known: true, Reusable: 11 * gb}}, 3 * gb, 0, ""},
		{"own garbage", []MemoryReading{{Machine: 2 * gb, Known: true}, {Machine: 2 * gb, Known: true, Reusable: 11 * gb}}, 3 * gb, 1, ""},
		{"garbage returned to the machine", []MemoryReading{{Machine: 2 * gb, Known: true}, {Machine: 13 * gb, Known: true}}, 3 * gb, 1, ""},
		{"short after collecting", []MemoryReading{{Machine: 2 * gb, Known: true}, {Machine: 2 * gb, Known: true, Reusable: gb / 2}}, 3 * gb, 1, "this machine has 2.5 GB available"},
		{"unknown", []MemoryReading{{Known: false}}, 300 * gb, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads, collects := 0, 0
			read := func() MemoryReading { r := tc.readings[min(reads, len(tc.readings)-1)]; reads++; return r }
			err := checkMemoryWith("a learner batch", tc.need, read, func() { collects++ })
			if collects != tc.collects {
				t.Errorf("%d collections, want %d", collects, tc.collects)
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (!errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("err %v, want ErrMemory saying %q", err, tc.refused)
			}
		})
	}
}

// TestReadMemoryFigures: the runtime/metrics figures ReadMemory reads
// exist in this Go (a renamed one would read as zero), and the process
// holds at least the heap it can reuse.
func TestReadMemoryFigures(t *testing.T) {
	known := map[string]bool{}
	for _, d := range metrics.All() {
		known[d.Name] = d.Kind == metrics.KindUint64
	}
	for _, name := range []string{metricHeapFree, metricHeapUnused, metricTotal, metricReleased} {
		if !known[name] {
			t.Errorf("runtime/metrics has no uint64 %s", name)
		}
	}
	r := ReadMemory()
	if r.Reusable < 0 || r.Held <= 0 || r.Reusable > r.Held {
		t.Errorf("reading %+v: want 0 <= Reusable <= Held, Held > 0", r)
	}
}
