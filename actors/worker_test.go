package actors

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/config"
)

// TestAwaitFutureEndsWithContext: a request to an actor that never
// answers returns as soon as its context ends, not when its timeout
// passes (a worker node asked a gone learner for 3 s before it could
// stop). The deadline below only marks failure.
func TestAwaitFutureEndsWithContext(t *testing.T) {
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	silent := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := awaitFuture(ctx, sys.Root.RequestFuture(silent, "are you there", 10*time.Minute))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still waiting for the request's 10-minute timeout after its context ended")
	}
}

// TestWorkerTraceFile: a worker node traces a run to the learner's
// trace.file, to its own instead when it has one, and without a file,
// saying so in one line, when the learner's path cannot be opened on the
// node's machine (the node exited 1 there, leaving the run without it).
func TestWorkerTraceFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "learner-only", "spans.jsonl")
	for _, tc := range []struct {
		name, learner, own string
		file, warning      string
	}{
		{"learner's", filepath.Join(dir, "a.jsonl"), "", filepath.Join(dir, "a.jsonl"), ""},
		{"own", filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "own.jsonl"), filepath.Join(dir, "own.jsonl"), ""},
		{"learner's missing, own", missing, filepath.Join(dir, "own2.jsonl"), filepath.Join(dir, "own2.jsonl"), ""},
		{"learner's missing", missing, "", "", "warning: the learner's trace.file: open " + missing + ": no such file or directory; this node does not write its spans to a file (give it its own --trace.file)\n"},
		{"none", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Cluster.Role = config.RoleGenerator
			cfg.Trace.File = tc.own
			var out bytes.Buffer
			w := &worker{cfg: cfg, out: &out, id: "generator-test"}
			learner := cfg.Trace
			learner.File = tc.learner
			tr, err := w.newTracing(learner)
			if err != nil {
				t.Fatalf("newTracing: %v", err)
			}
			defer tr.Shutdown(context.Background())
			if out.String() != tc.warning {
				t.Errorf("said %q, want %q", out.String(), tc.warning)
			}
			if file := tr.File(); file != tc.file {
				t.Errorf("spans to %q, want %q", tr.File(), tc.file)
			}
		})
	}
}
