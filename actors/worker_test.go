package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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
