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
func TestReadBackIndependently(t *testing.T) {
	if err := exec.Command(debianPython, "-c", "import google.protobuf, crc32c").Run(); err != nil {
		t.Skip("Debian's python3-protobuf and python3-crc32c are not installed (make deps installs them)")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (make deps installs protobuf-compiler)")
	}
	dir := t.TempDir()
	pb2 := filepath.Join(dir, "pb2")
	if err := os.MkdirAll(pb2, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("protoc", "--proto_path=testdata", "--python_out="+pb2, "event.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
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
	if !strings.HasPrefix(filepath.Base(w.Path()), FilePrefix) {
		t.Errorf("file name %q does not start with %q", filepath.Base(w.Path()), FilePrefix)
	}
	out, err := exec.Command(debianPython, filepath.Join("testdata", "read_events.py"), pb2, w.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("read_events.py: %v\n%s", err, out)
	}
	type event struct {
		WallTime    float64            `json:"wall_time"`
		Step        int64              `json:"step"`
		FileVersion string             `json:"file_version"`
		Scalars     map[string]float64 `json:"scalars"`
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

func TestMaskedCRC(t *testing.T) {
	// CRC-32C("123456789") is 0xe3069283 (the check value of the
	// Castagnoli polynomial); the mask rotates right by 15 and adds
	// 0xa282ead8.
	c := uint32(0xe3069283)
	if got, want := maskedCRC([]byte("123456789")), (c>>15|c<<17)+0xa282ead8; got != want {
		t.Errorf("maskedCRC = %#x, want %#x", got, want)
	}
}
