package tensorboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debianPython is the interpreter Debian's python3-protobuf and
// python3-crc32c install into (make deps installs them).
const debianPython = "/usr/bin/python3"

// TestReadBackIndependently writes events and reads them back with an
// independent reader: testdata/read_events.py, which checks every record's
// masked CRC-32C with the crc32c package and parses the Event protocol
// buffers with Google's protobuf runtime from code that protoc generates
// from testdata/event.proto (the field numbers of TensorFlow's
// event.proto and summary.proto). Steps, tags and values (as float32) must
// come back as written.
// event is one event as testdata/read_events.py prints it.
type event struct {
	WallTime    float64            `json:"wall_time"`
	Step        int64              `json:"step"`
	FileVersion string             `json:"file_version"`
	Scalars     map[string]float64 `json:"scalars"`
}

// independentReader returns a function reading an event file with
// testdata/read_events.py, which checks every record's masked CRC-32C
// with the crc32c package and parses the Event protocol buffers with
// Google's protobuf runtime from code that protoc generates from
// testdata/event.proto (the field numbers of TensorFlow's event.proto and
// summary.proto). It skips the test when those are not installed.
func independentReader(t *testing.T) func(path string) []event {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import google.protobuf, crc32c").Run(); err != nil {
		t.Skip("Debian's python3-protobuf and python3-crc32c are not installed (make deps installs them)")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (make deps installs protobuf-compiler)")
	}
	pb2 := filepath.Join(t.TempDir(), "pb2")
	if err := os.MkdirAll(pb2, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("protoc", "--proto_path=testdata", "--python_out="+pb2, "event.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	return func(path string) []event {
		t.Helper()
		out, err := exec.Command(debianPython, filepath.Join("testdata", "read_events.py"), pb2, path).CombinedOutput()
		if err != nil {
			t.Fatalf("read_events.py %s: %v\n%s", path, err, out)
		}
		var events []event
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("reader output %q: %v", sc.Text(), err)
			}
			events = append(events, e)
		}
		return events
	}
}

// TestReadBackIndependently writes events and reads them back with the
// independent reader: steps, tags and values (as float32) must come back
// as written.
func TestReadBackIndependently(t *testing.T) {
	read := independentReader(t)
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "tb"))
	if err != nil {
		t.Fatal(err)
	}
	steps := []map[string]float64{
		{"train/reward": 0.3125, "train/loss": -1.5e-3, "time/step_s": 0.25, "eval/greedy_accuracy": 0.75},
		{"train/reward": 0.1 + 0.2, "train/kl": 1e-9, "perf/tokens_per_s": 58831.5, "train/entropy": -0.0},
		{"train/tau": math.MaxFloat32, "train/beta": 1e-40},
	}
	at := time.Unix(1790000000, 250_000_000)
	for i, m := range steps {
		if err := w.WriteScalars(int64(10*(i+1)), at.Add(time.Duration(i)*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.path), FilePrefix) {
		t.Errorf("file name %q does not start with %q", filepath.Base(w.path), FilePrefix)
	}
	events := read(w.path)
	if len(events) != len(steps)+1 || events[0].FileVersion != "brain.Event:2" {
		t.Fatalf("read %d events (first %+v), want the file version and %d summaries", len(events), events[0], len(steps))
	}
	for i, m := range steps {
		e := events[i+1]
		if e.Step != int64(10*(i+1)) || math.Abs(e.WallTime-float64(at.Unix())-0.25-float64(i)) > 1e-6 {
			t.Errorf("event %d: step %d wall time %f", i, e.Step, e.WallTime)
		}
		if len(e.Scalars) != len(m) {
			t.Errorf("event %d: %d scalars, wrote %d", i, len(e.Scalars), len(m))
		}
		for k, v := range m {
			got, ok := e.Scalars[k]
			if !ok || float32(got) != float32(v) {
				t.Errorf("event %d: %s = %v (present %t), wrote %v (float32 %v)", i, k, got, ok, v, float32(v))
			}
		}
	}
}

// writeSteps writes a file of steps from..to in dir with one scalar each
// (value = step) and returns its path.
func writeSteps(t *testing.T, dir string, from, to int) string {
	t.Helper()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	for s := from; s <= to; s++ {
		if err := w.WriteScalars(int64(s), time.Unix(1790000000, 0), map[string]float64{"train/reward": float64(s)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.path
}

// TestCreateNamesFilesApart: files created by one process within one
// second get distinct names.
func TestCreateNamesFilesApart(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 3 {
		p := writeSteps(t, dir, 1, 1)
		if seen[p] {
			t.Fatalf("file %s created twice", p)
		}
		seen[p] = true
	}
}

// TestPrune: a resume after step 3 cuts a file of steps 1..6 with a torn
// last record to steps 1..3, removes a file of steps 4..5 and leaves a
// file of steps 1..2 as it was; the independent reader reads the result.
func TestPrune(t *testing.T) {
	read := independentReader(t)
	dir := t.TempDir()
	long := writeSteps(t, dir, 1, 6)
	f, err := os.OpenFile(long, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{40, 0, 0, 0, 0, 0, 0, 0, 1, 2}); err != nil { // a record cut short
		t.Fatal(err)
	}
	f.Close()
	later := writeSteps(t, dir, 4, 5)
	short := writeSteps(t, dir, 1, 2)
	before, err := os.ReadFile(short)
	if err != nil {
		t.Fatal(err)
	}
	want := writeSteps(t, t.TempDir(), 1, 3) // the bytes the cut file must have, but for the wall time of the first event
	if err := Prune(dir, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(later); !os.IsNotExist(err) {
		t.Errorf("file of steps 4..5 not removed (%v)", err)
	}
	if after, err := os.ReadFile(short); err != nil || !bytes.Equal(after, before) {
		t.Errorf("file of steps 1..2 changed (%v)", err)
	}
	got, err1 := os.Stat(long)
	ref, err2 := os.Stat(want)
	if err1 != nil || err2 != nil || got.Size() != ref.Size() {
		t.Fatalf("cut file: %v %v, want %d bytes (%v %v)", got, ref, ref.Size(), err1, err2)
	}
	events := read(long)
	if len(events) != 4 || events[0].FileVersion == "" {
		t.Fatalf("cut file holds %+v, want the file version and steps 1..3", events)
	}
	for i, e := range events[1:] {
		if e.Step != int64(i+1) || e.Scalars["train/reward"] != float64(i+1) {
			t.Errorf("event %d: %+v", i+1, e)
		}
	}
	if err := Prune(filepath.Join(dir, "missing"), 3); err != nil {
		t.Errorf("Prune of a missing directory: %v", err)
	}
}

func TestMaskedCRC(t *testing.T) {
	// CRC-32C("123456789") is 0xe3069283 (the check value of the
	// Castagnoli polynomial); the mask rotates right by 15 and adds
	// 0xa282ead8.
	c := uint32(0xe3069283)
	if got, want := maskedCRC([]byte("123456789")), (c>>15|c<<17)+0xa282ead8; got != want {
		t.Errorf("maskedCRC = %#x, want %#x", got, want)
	}
}
