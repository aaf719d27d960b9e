package actors

import (
	"context"
	"errors"
	"sync"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
)

// stepResult is one step as the driver saw it: its outcome or why it was
// skipped, the wall time since the previous step ended, when its batch
// began, and its trace (the step's root span, open while it is recorded).
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

// drive runs steps first..steps-1 of t, each with Step: a step starts while
// fewer than ahead steps are running (1: each batch waits for the weights
// of the step before, which is synchronous; see batchesAhead), and the
// queue it is handed as its pace lets it make its batch once the step
// before has made its own (batches are generated in step order, each from
// the weights of its sourceStep) and learn only once the step before is
// over and recorded, so steps learn and are recorded in order. record gets
// each step's outcome or skip and the wall time since the previous step.
// When ctx is cancelled no step starts; a batch still being made is
// dropped at its next stage (nothing was learned from it), while a step
// whose turn to learn had come is finished and recorded (Step learns on a
// context that is not cancelled, under the stages' own timeouts). It
// returns the number of steps done (counting from 0) or record's first
// error; every step counted is one the learner took or one recorded as
// skipped.
func drive(ctx context.Context, t *Trainer, first, steps int64, ahead int,
	record func(ctx context.Context, res stepResult) error) (int64, error) {
	run, stop := context.WithCancel(ctx) // a record error ends the steps in flight
	defer stop()
	q := newQueue(ctx, first, steps, ahead, record, stop)
	var wg sync.WaitGroup
	for n := first; n < steps; n++ {
		if !q.start(run) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = Step(run, t, n, q) // the queue keeps what ends the run
		}()
	}
	wg.Wait()
	return q.result()
}

// queue is the pace of a run: it lets up to ahead steps run at once, each
// make its batch and learn in step order, records them in that order and
// counts them.
type queue struct {
	ctx    context.Context // the run's: cancelled by an interrupt
	record func(ctx context.Context, res stepResult) error
	stop   func() // ends the steps in flight
	slots  chan struct{}
	steps  int64 // the run ends before this step

	mu      sync.Mutex
	turns   [2]map[int64]chan struct{} // by phase: closed when the step may begin it
	started map[int64]time.Time        // when each step's batch began
	done    int64                      // steps over and recorded, counting from 0
	prev    time.Time                  // when the last step recorded was over
	err     error                      // the first record error
}

func newQueue(ctx context.Context, first, steps int64, ahead int, record func(context.Context, stepResult) error, stop func()) *queue {
	q := &queue{ctx: ctx, record: record, stop: stop, slots: make(chan struct{}, ahead), steps: steps,
		turns: [2]map[int64]chan struct{}{{}, {}}, started: map[int64]time.Time{}, done: first, prev: time.Now()}
	close(q.turnOf(making, first))
	close(q.turnOf(learning, first))
	return q
}

// start waits for a free slot for the next step and reports whether it
// may start (false once run ends).
func (q *queue) start(run context.Context) bool {
	select {
	case q.slots <- struct{}{}:
	case <-run.Done():
		return false
	}
	return run.Err() == nil
}

// turnOf is step n's turn to begin ph: closed once it may.
func (q *queue) turnOf(ph phase, n int64) chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	c, ok := q.turns[ph][n]
	if !ok {
		c = make(chan struct{})
		q.turns[ph][n] = c
	}
	return c
}

// turn implements pace. A step that reaches its turn to learn has made its
// batch: the next may make its own. A turn that came before the run was
// cancelled is taken; one still awaited when it is cancelled is not.
func (q *queue) turn(ctx context.Context, n int64, ph phase) error {
	if ph == learning {
		close(q.turnOf(making, n+1))
	}
	c := q.turnOf(ph, n)
	select {
	case <-c:
	default:
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if ph == making {
		q.mu.Lock()
		q.started[n] = time.Now()
		q.mu.Unlock()
	}
	return nil
}

// over implements pace: it frees step n's slot (the next step may start:
// the weights after step n are known), records the step and, unless the
// run is ending, lets step n+1 learn. A step interrupted while its batch
// was made was not taken: it is dropped, unrecorded.
func (q *queue) over(ctx context.Context, n int64, out *Outcome, err error) error {
	now := time.Now()
	<-q.slots
	q.mu.Lock()
	res := stepResult{n: n, out: out, err: err, took: now.Sub(q.prev), ctx: ctx, started: q.started[n]}
	delete(q.started, n)
	delete(q.turns[making], n)
	delete(q.turns[learning], n)
	q.mu.Unlock()
	if err != nil && q.ctx.Err() != nil && errors.Is(err, q.ctx.Err()) {
		oteltrace.SpanFromContext(ctx).AddEvent("interrupted while its batch was made: not taken")
		return err
	}
	if rerr := q.record(q.ctx, res); rerr != nil {
		q.mu.Lock()
		q.err = rerr
		q.mu.Unlock()
		q.stop()
		return rerr
	}
	q.mu.Lock()
	q.done, q.prev = n+1, now
	q.mu.Unlock()
	if q.ctx.Err() != nil {
		q.stop()
		return nil
	}
	close(q.turnOf(learning, n+1))
	return nil
}

// goesOn implements pace: a step follows n unless n is the run's last or
// the run is ending.
func (q *queue) goesOn(n int64) bool { return n+1 < q.steps && q.ctx.Err() == nil }

// result is the number of steps done and the first record error.
func (q *queue) result() (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.done, q.err
}
