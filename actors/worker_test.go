package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors/node"
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

// TestSeedVerdict: a worker ends for TLS reasons only when no seed's
// transport will ever fit; a seed of another CA beside one where the
// learner is not up yet, or answers, is named in the waiting line (the
// worker ended at the first such seed, before its learner came up at the
// next).
func TestSeedVerdict(t *testing.T) {
	otherCA := fmt.Errorf("%w: the node at 10.0.0.1:6330: its certificate is signed by another CA", node.ErrTLS)
	expired := fmt.Errorf("%w: the node at 10.0.0.3:6330: its certificate expired", node.ErrTLS)
	refused := errors.New("10.0.0.2:6330: dial: connect: connection refused")
	for _, tc := range []struct {
		name    string
		errs    []error
		why     string
		wantErr error
	}{
		{"a learner answers", []error{nil}, "", nil},
		{"not listening yet", []error{refused}, " (" + refused.Error() + ")", nil},
		{"another CA", []error{otherCA}, "", otherCA},
		{"another CA and an expired certificate", []error{otherCA, expired}, "", otherCA},
		{"another CA, then one not listening yet", []error{otherCA, refused}, " (" + otherCA.Error() + "; " + refused.Error() + ")", nil},
		{"not listening yet, then another CA", []error{refused, otherCA}, " (" + refused.Error() + "; " + otherCA.Error() + ")", nil},
		{"another CA, then a learner", []error{otherCA, nil}, " (" + otherCA.Error() + ")", nil},
	} {
		why, err := seedVerdict(tc.errs)
		if why != tc.why || err != tc.wantErr {
			t.Errorf("%s: seedVerdict = %q, %v; want %q, %v", tc.name, why, err, tc.why, tc.wantErr)
		}
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
