package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
)

// batchOrSkip is a produced batch, or why step n has none, with the
// step's trace.
type batchOrSkip struct {
	n       int64
	batch   *produced
	err     error
	ctx     context.Context // holds the step's root span
	started time.Time       // when the batch's production began
}

// stepResult is one step as the driver saw it: its outcome or why it was
// skipped, the wall time since the previous step ended, and its trace
// (the root span, ended by whoever records the step).
type stepResult struct {
	n       int64
	out     *Outcome
	err     error
	took    time.Duration
	ctx     context.Context
	started time.Time
}

// batchesAhead is how many batches may be produced and not yet consumed
// so that no sample is more than maxStaleness policy versions behind the
// learner when it is consumed: each batch ahead costs one version, and
// weights that reach the generators only every syncEvery steps cost up to
// syncEvery − 1 more. config refuses syncEvery > maxStaleness + 1 in
// asynchronous mode; synchronous mode (0) publishes every step.
func batchesAhead(maxStaleness, syncEvery int) int {
	if maxStaleness == 0 {
		return 1
	}
	return max(maxStaleness+1-(max(syncEvery, 1)-1), 1)
}

// drive runs steps first..steps-1 of t: a producer goroutine makes
// batches while fewer than ahead are waiting to be consumed (1: each batch
// waits for the previous step's weights, which is synchronous; see
// batchesAhead), each from the weights of its sourceStep, and this
// goroutine consumes them in order, calling record after each step with
// its outcome or skip and the wall time since the previous step. A
// batch's slot is freed only once its step is over (Trainer.advance), so
// the weights the next batch is generated from are always known. When ctx
// is cancelled it starts no new batch and stops: a batch still being made
// is dropped at its next stage (nothing was learned from it), while a
// batch the learner has started on is finished and recorded (consume runs
// on a context that is not cancelled, under the stages' own timeouts). It
// returns the number of steps done (counting from 0) or record's error;
// every step counted is one the learner took or one recorded as skipped.
func drive(ctx context.Context, t *Trainer, first, steps int64, ahead int,
	record func(ctx context.Context, res stepResult) error) (int64, error) {
	slots := make(chan struct{}, ahead) // batches produced and not yet consumed
	batches := make(chan batchOrSkip, ahead)
	learning := context.WithoutCancel(ctx) // a step half learned would be lost: finish it
	var stopped atomic.Bool
	go func() { // the producer
		defer close(batches)
		for n := first; n < steps; n++ {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if ctx.Err() != nil || stopped.Load() {
				return
			}
			started := time.Now()
			sctx, _ := t.startStep(ctx, n)
			b, err := t.produce(sctx, n)
			batches <- batchOrSkip{n: n, batch: b, err: err, ctx: sctx, started: started}
		}
	}()
	defer func() { // let the producer finish its batch in flight and exit
		stopped.Store(true)
		for item := range batches {
			oteltrace.SpanFromContext(item.ctx).End()
			select {
			case <-slots:
			default:
			}
		}
	}()
	last, prev := first, time.Now()
	for item := range batches {
		root := oteltrace.SpanFromContext(item.ctx)
		if item.err != nil && ctx.Err() != nil && errors.Is(item.err, ctx.Err()) {
			root.AddEvent("interrupted while its batch was made: not taken")
			root.End()
			break // interrupted while its batch was made: the step was not taken
		}
		var out *Outcome
		err := item.err
		if err == nil {
			out, err = t.consume(oteltrace.ContextWithSpan(learning, root), item.batch)
		}
		t.advance(item.n)
		<-slots
		now := time.Now()
		res := stepResult{n: item.n, out: out, err: err, took: now.Sub(prev), ctx: item.ctx, started: item.started}
		if err := record(ctx, res); err != nil {
			return last, err
		}
		last, prev = item.n+1, now
		if ctx.Err() != nil {
			break
		}
	}
	return last, nil
}
