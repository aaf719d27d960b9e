package runlog

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestEncodeLine(t *testing.T) {
	tests := []struct {
		name string
		step int
		m    map[string]float64
		want string
	}{
		{"empty", 0, nil, `{"step":0}` + "\n"},
		{"keys sorted", 7, map[string]float64{"train/tau": 0.5, "train/beta": 0, "time/learner_s": 1.25},
			`{"step":7,"time/learner_s":1.25,"train/beta":0,"train/tau":0.5}` + "\n"},
		{"non-finite as null", 3, map[string]float64{"a": math.NaN(), "b": math.Inf(1), "c": math.Inf(-1)},
			`{"step":3,"a":null,"b":null,"c":null}` + "\n"},
		{"key escaped", 1, map[string]float64{`q"x`: 2}, `{"step":1,"q\"x":2}` + "\n"},
		// encoding/json writes large and small magnitudes with exponents.
		{"exponents", 2, map[string]float64{"big": 1e21, "small": 1e-7}, `{"step":2,"big":1e+21,"small":1e-7}` + "\n"},
	}
	for _, tc := range tests {
		got, err := encodeLine(tc.step, tc.m, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: line = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEncodeLineReservedKey(t *testing.T) {
	if _, err := encodeLine(1, map[string]float64{"step": 1}, ""); !errors.Is(err, ErrBadMetrics) {
		t.Errorf("key step: err = %v, want ErrBadMetrics", err)
	}
}

func TestDecodeMetricsRoundTrip(t *testing.T) {
	in := map[string]float64{"train/reward": 0.412, "x": math.NaN(), "y": -3e-9}
	line, err := encodeLine(42, in, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeMetrics(line)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step != 42 || len(r.Values) != 3 || r.Values["train/reward"] != 0.412 || r.Values["y"] != -3e-9 || !math.IsNaN(r.Values["x"]) {
		t.Errorf("round trip = %+v, want step 42 and %v", r, in)
	}
	for _, bad := range []string{`{`, `{"train/reward":1}`, `{"step":"a"}`, `{"step":1.5}`} {
		if _, err := DecodeMetrics([]byte(bad)); !errors.Is(err, ErrBadMetrics) {
			t.Errorf("DecodeMetrics(%s): err = %v, want ErrBadMetrics", bad, err)
		}
	}
}

// readSteps returns the steps of the run's metrics.jsonl.
func readSteps(t *testing.T, d *Dir) []int {
	t.Helper()
	recs, err := ReadMetrics(d.MetricsPath())
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range recs {
		steps = append(steps, r.Step)
	}
	return steps
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMetricsResumeTruncates(t *testing.T) {
	root := t.TempDir()
	d, err := Create(root, "run")
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 5; s++ {
		if err := d.WriteMetrics(s, map[string]float64{"train/reward": float64(s)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteMetrics(5, nil); !errors.Is(err, ErrBadMetrics) {
		t.Errorf("duplicate step 5: err = %v, want ErrBadMetrics", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteMetrics(6, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
	// A crash cut the last line short.
	f, err := os.OpenFile(d.MetricsPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":6,"train/rew`)
	f.Close()

	d, err = Open(filepath.Join(root, "run"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := readSteps(t, d); !equalInts(got, []int{1, 2, 3, 4, 5}) || d.LastStep() != 5 {
		t.Errorf("after Open: steps %v, last %d; want 1..5, 5", got, d.LastStep())
	}
	if _, err := d.Resume(3); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteMetrics(4, map[string]float64{"train/reward": 40}); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadMetrics(d.MetricsPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := readSteps(t, d); !equalInts(got, []int{1, 2, 3, 4}) || recs[3].Values["train/reward"] != 40 {
		t.Errorf("after Resume(3)+step 4: steps %v, step 4 reward %v; want 1..4, 40", got, recs[3].Values["train/reward"])
	}
}

func TestCreateRefusesExistingRun(t *testing.T) {
	root := t.TempDir()
	d, err := Create(root, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(root, "r1"); !errors.Is(err, ErrInUse) {
		t.Errorf("Create over an open run: err = %v, want ErrInUse", err)
	}
	if _, err := Open(filepath.Join(root, "r1")); !errors.Is(err, ErrInUse) {
		t.Errorf("Open of an open run: err = %v, want ErrInUse", err)
	}
	if err := d.WriteMetrics(1, map[string]float64{"train/reward": 1}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Create(root, "r1"); !errors.Is(err, ErrRunExists) {
		t.Errorf("Create over a run with a metrics line: err = %v, want ErrRunExists", err)
	}
	for _, name := range []string{"", ".", "..", "a/b", `a\b`, ".hidden"} {
		if _, err := Create(root, name); !errors.Is(err, ErrBadName) {
			t.Errorf("Create(%q): err = %v, want ErrBadName", name, err)
		}
	}
	if _, err := Open(filepath.Join(root, "nothing")); !errors.Is(err, ErrNotRun) {
		t.Errorf("Open(missing): err = %v, want ErrNotRun", err)
	}
	for _, sub := range []string{SamplesDir, CheckpointsDir, MetricsFile} {
		if _, err := os.Stat(filepath.Join(root, "r1", sub)); err != nil {
			t.Errorf("run layout: %v", err)
		}
	}
}

func TestWriteConfig(t *testing.T) {
	d, err := Create(t.TempDir(), "c")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	text := []byte("trainer:\n  max_staleness: 0\n")
	if err := d.WriteConfig(text); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(d.Path(), ConfigFile))
	if err != nil || string(got) != string(text) {
		t.Errorf("config.yaml = %q (%v), want %q", got, err, text)
	}
}

func TestReadMetricsBadLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetricsFile)
	os.WriteFile(path, []byte("{\"step\":1}\nnot json\n"), 0o644)
	if _, err := ReadMetrics(path); !errors.Is(err, ErrBadMetrics) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ReadMetrics: err = %v, want ErrBadMetrics at line 2", err)
	}
}

// TestCreateReclaimsDeadStart: a directory left by a run that never wrote a
// metrics line or checkpoint (killed, or interrupted twice) is taken over
// and cleared; one holding anything else is refused and left as it is.
func TestCreateReclaimsDeadStart(t *testing.T) {
	root := t.TempDir()
	dead := filepath.Join(root, "dead")
	for _, sub := range []string{SamplesDir, CheckpointsDir} {
		if err := os.MkdirAll(filepath.Join(dead, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{ConfigFile: "task: {}\n", MetricsFile: ""} {
		if err := os.WriteFile(filepath.Join(dead, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Create(root, "dead")
	if err != nil || d.Created() {
		t.Fatalf("Create over a dead start: %v (created %v), want it taken over", err, d != nil && d.Created())
	}
	if _, err := os.Stat(filepath.Join(dead, ConfigFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead start's config.yaml is still there: %v", err)
	}
	d.Close()

	kept := filepath.Join(root, "kept")
	if err := os.MkdirAll(filepath.Join(kept, CheckpointsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kept, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(root, "kept"); !errors.Is(err, ErrRunExists) {
		t.Errorf("Create over a directory with notes.txt: %v, want ErrRunExists", err)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("notes.txt after the refused Create: %q, %v", b, err)
	}
}

// TestCreateConcurrent: of runs creating one name at once, exactly one
// gets the directory (the others: ErrRunExists, or ErrInUse when they find
// it already open).
func TestCreateConcurrent(t *testing.T) {
	root := t.TempDir()
	for i := range 50 {
		name := fmt.Sprintf("r%d", i)
		var wg sync.WaitGroup
		dirs := make([]*Dir, 3)
		for j := range dirs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := Create(root, name)
				if err != nil && !errors.Is(err, ErrRunExists) && !errors.Is(err, ErrInUse) {
					t.Errorf("Create %s: %v", name, err)
				}
				dirs[j] = d
			}()
		}
		wg.Wait()
		won := 0
		for _, d := range dirs {
			if d != nil {
				won++
				d.Close()
			}
		}
		if won != 1 {
			t.Fatalf("%s: %d runs got the directory, want 1", name, won)
		}
	}
}

// TestResumeKeepsLinesAroundABadOne: a resume drops the lines after the
// checkpoint and moves an unreadable or out-of-order line to
// metrics.jsonl.unreadable, keeping every readable line around it (one bad
// line used to delete every good line after it).
func TestResumeKeepsLinesAroundABadOne(t *testing.T) {
	root := t.TempDir()
	d, err := Create(root, "run")
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 6; s++ {
		if err := d.WriteMetrics(s, map[string]float64{"train/reward": float64(s)}); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	path := filepath.Join(root, "run", MetricsFile)
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	damaged := lines[0] + lines[1] + "{\"step\":3,\"train/rew\x00\n" + lines[3] + lines[1] + lines[4] + lines[5] + `{"step":7`
	if err := os.WriteFile(path, []byte(damaged), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err = Open(filepath.Join(root, "run"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	aside, err := d.Resume(5)
	if err != nil || aside != 2 {
		t.Fatalf("Resume = %d, %v; want 2 lines aside", aside, err)
	}
	if got := readSteps(t, d); !equalInts(got, []int{1, 2, 4, 5}) || d.LastStep() != 5 {
		t.Errorf("steps %v, last %d; want 1 2 4 5, 5", got, d.LastStep())
	}
	bad, err := os.ReadFile(filepath.Join(root, "run", MetricsAsideFile))
	if want := "{\"step\":3,\"train/rew\x00\n" + lines[1]; err != nil || string(bad) != want {
		t.Errorf("%s = %q (%v), want %q", MetricsAsideFile, bad, err, want)
	}
	if err := d.WriteMetrics(6, nil); err != nil {
		t.Fatal(err)
	}
	if got := readSteps(t, d); !equalInts(got, []int{1, 2, 4, 5, 6}) {
		t.Errorf("after writing step 6: steps %v", got)
	}
}

// TestOpenFinishesAnInterruptedRewrite: a crash while Resume copied the
// rewritten metrics over metrics.jsonl left its journal; the next Open
// finishes the copy.
func TestOpenFinishesAnInterruptedRewrite(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "run")
	d, err := Create(root, "run")
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	good := "{\"step\":1}\n{\"step\":2}\n"
	os.WriteFile(filepath.Join(run, metricsJournalFile), []byte(good), 0o644)
	os.WriteFile(filepath.Join(run, MetricsFile), []byte("{\"step\":1}\n{\"st"), 0o644) // the copy, cut short
	d, err = Open(run)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if data, _ := os.ReadFile(filepath.Join(run, MetricsFile)); string(data) != good || d.LastStep() != 2 {
		t.Errorf("metrics %q, last step %d; want the journal's", data, d.LastStep())
	}
	if _, err := os.Stat(filepath.Join(run, metricsJournalFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal left: %v", err)
	}
}

// TestTraceIDInLine: a traced step's line names its trace, and reading
// the line back skips the string.
func TestTraceIDInLine(t *testing.T) {
	line, err := encodeLine(5, map[string]float64{"train/kl": 0.25}, "4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil || string(line) != `{"step":5,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","train/kl":0.25}`+"\n" {
		t.Fatalf("line %q (%v)", line, err)
	}
	r, err := DecodeMetrics(line)
	if err != nil || r.Step != 5 || len(r.Values) != 1 || r.Values["train/kl"] != 0.25 {
		t.Errorf("read back %+v (%v)", r, err)
	}
	if _, err := encodeLine(1, map[string]float64{TraceIDKey: 1}, ""); !errors.Is(err, ErrBadMetrics) {
		t.Errorf("trace_id as a metric key: %v, want ErrBadMetrics", err)
	}
}

// eventFiles lists the TensorBoard event files of run directory d.
func eventFiles(t *testing.T, d *Dir) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(d.TensorBoardPath(), "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// growEventFile writes metrics lines from..to into d and returns the size
// of its one event file after each, which must grow line by line (it is
// flushed).
func growEventFile(t *testing.T, d *Dir, from, to int) []int64 {
	t.Helper()
	var sizes []int64
	for step := from; step <= to; step++ {
		if err := d.WriteMetrics(step, map[string]float64{"a": float64(step)}); err != nil {
			t.Fatal(err)
		}
		f := eventFiles(t, d)
		st, err := os.Stat(f[0])
		if len(f) != 1 || err != nil {
			t.Fatalf("after step %d: event files %v (%v)", step, f, err)
		}
		sizes = append(sizes, st.Size())
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] <= sizes[i-1] {
			t.Errorf("event file sizes %v do not grow line by line", sizes)
		}
	}
	return sizes
}

// TestTensorBoardFiles: without WriteTensorBoard a run has no event files;
// with it, its first metrics line makes one file, which later lines grow;
// a directory that is opened again and resumed cuts its files (a file
// without a step left is removed) and adds a file of its own. The events'
// contents are read back independently in actors' TestRunTensorBoard and
// tensorboard's tests.
func TestTensorBoardFiles(t *testing.T) {
	root := t.TempDir()
	d, err := Create(root, "run")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteMetrics(1, map[string]float64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if f := eventFiles(t, d); len(f) != 0 {
		t.Fatalf("event files %v without WriteTensorBoard", f)
	}
	d.WriteTensorBoard()
	if f := eventFiles(t, d); len(f) != 0 {
		t.Fatalf("event files %v before a metrics line", f)
	}
	sizes := growEventFile(t, d, 2, 4)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	first := eventFiles(t, d)[0]
	for _, tc := range []struct {
		resume int
		size   int64 // of the first file after Resume; 0: removed
	}{{3, sizes[1]}, {1, 0}} {
		d, err = Open(d.Path())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Resume(tc.resume); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(first)
		switch {
		case tc.size == 0 && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("resume at %d: the file of steps 2..3 is still there (%v)", tc.resume, err)
		case tc.size > 0 && (err != nil || st.Size() != tc.size):
			t.Errorf("resume at %d: file %v (%v), want %d bytes", tc.resume, st, err, tc.size)
		}
		d.WriteTensorBoard()
		if err := d.WriteMetrics(tc.resume+1, map[string]float64{"a": 0}); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if f := eventFiles(t, d); len(f) != 1 {
		t.Errorf("event files %v, want only the last resumed run's (the resume at step 1 emptied the others)", f)
	}
}
