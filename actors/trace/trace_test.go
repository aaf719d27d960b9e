package trace

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	oteltrace "go.opentelemetry.io/otel/trace"
)

// failAfter writes n bytes, then fails every write with ENOSPC.
type failAfter struct {
	n      int
	writes int
}

func (f *failAfter) Write(b []byte) (int, error) {
	f.writes++
	if len(b) > f.n {
		return 0, syscall.ENOSPC
	}
	f.n -= len(b)
	return len(b), nil
}

// TestSinkWarnsOnce: a trace.file that fails to take a write (a full
// disk) says so in one line and drops the spans after it; it printed a
// line per span for the rest of the run.
func TestSinkWarnsOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		room   int
		writes int
		lines  int
	}{
		{"room for all", 1 << 20, 10, 0},
		{"full at once", 0, 1, 1},
		{"full after three", 3 * 8, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warn bytes.Buffer
			w := &failAfter{n: tc.room}
			s := &sink{w: w, name: "spans.jsonl", warn: &warn}
			for range 10 {
				if n, err := s.Write([]byte("12345678")); n != 8 || err != nil {
					t.Fatalf("Write = %d, %v; want 8, nil", n, err)
				}
			}
			if w.writes != tc.writes {
				t.Errorf("%d writes reached the file, want %d", w.writes, tc.writes)
			}
			if got := strings.Count(warn.String(), "\n"); got != tc.lines {
				t.Fatalf("%d warning lines, want %d: %q", got, tc.lines, warn.String())
			}
			if tc.lines > 0 && !strings.HasPrefix(warn.String(), `warning: trace.file "spans.jsonl": no space left on device;`) {
				t.Errorf("warning %q", warn.String())
			}
		})
	}
}

// TestFileFailsQuietly: a provider whose trace.file stops taking writes
// mid-run keeps tracing without an export error, and warns once.
func TestFileFailsQuietly(t *testing.T) {
	var warn bytes.Buffer
	p, err := New(context.Background(), Options{ServiceName: "mgrpo", InstanceID: "n", File: filepath.Join(t.TempDir(), "spans.jsonl"), SampleRatio: 1, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.file.Close(); err != nil { // every write fails from now on
		t.Fatal(err)
	}
	for range 3 {
		for range 50 {
			_, span := p.Tracer().Start(context.Background(), "step", oteltrace.WithNewRoot())
			span.End()
		}
		if err := p.sdk.ForceFlush(context.Background()); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	if err := p.sdk.Shutdown(context.Background()); err != nil { // p.Shutdown would close the file again
		t.Fatalf("shutdown: %v", err)
	}
	if got := strings.Count(warn.String(), "\n"); got != 1 || !strings.Contains(warn.String(), "file already closed") {
		t.Fatalf("warnings: %q, want one line", warn.String())
	}
}
