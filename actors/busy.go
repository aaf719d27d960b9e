package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
)

// How long a step runs before the progress output says what it is doing,
// and how often it says it again: on a terminal, whose progress line is
// rewritten in place, busyTerminal; in a log, a line every busyLog. The
// demo presets' steps take milliseconds and never show it; a real
// model's on a CPU take minutes.
const (
	busyTerminal = 5 * time.Second
	busyLog      = time.Minute
)

// activity is what a step not yet over is doing: making its batch
// (generation, rewards, reference log-probs) or learning from it, since
// it began making it.
type activity struct {
	phase phase
	since time.Time
}

// doing records that step n has begun ph.
func (t *Trainer) doing(n int64, ph phase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.active[n]
	if !ok {
		a.since = time.Now()
	}
	a.phase = ph
	t.active[n] = a
}

// done records that step n is over.
func (t *Trainer) done(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.active, n)
}

// oldest returns the lowest step not yet over and what it is doing (false
// when none runs): the step the progress line waits for.
func (t *Trainer) oldest() (int64, activity, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, a, ok := int64(0), activity{}, false
	for step, act := range t.active {
		if !ok || step < n {
			n, a, ok = step, act, true
		}
	}
	return n, a, ok
}

// partsRequest asks the coordinator how far its stage requests are (a
// partsInFlight).
type partsRequest struct{}

// partsInFlight counts the parts of the stage requests in flight: all of
// them, those answered, and those waiting for a stage actor (no worker
// node serves their stage yet, or every one is busy).
type partsInFlight struct {
	total, back, waiting int
}

// partsInFlight counts the parts of the requests whose tries are running
// or waiting in the stage pools (each request once, however many of its
// parts are on their way; the learner's and controller's are not parts).
func (a *coordinator) partsInFlight() partsInFlight {
	var p partsInFlight
	seen := map[*gather]bool{}
	count := func(t *task) {
		if g := t.g; !seen[g] && !g.over {
			seen[g] = true
			p.total += len(g.replies)
			p.back += len(g.replies) - g.left
		}
	}
	for _, pl := range a.pools {
		if pl.stateful {
			continue
		}
		for t := range pl.running {
			count(t)
		}
		for _, t := range pl.waiting {
			count(t)
			p.waiting++
		}
	}
	return p
}

// busyLine says what step n+1 of total (0: unknown) is doing, now.
func busyLine(n, total int64, a activity, parts partsInFlight, now time.Time) string {
	step := fmt.Sprintf("step %d", n+1)
	if total > 0 {
		step = fmt.Sprintf("step %d/%d", n+1, total)
	}
	line := fmt.Sprintf("%s running for %s: ", step, runlog.FormatETA(now.Sub(a.since)))
	if a.phase == learning {
		return line + "learning from its batch"
	}
	line += "making its batch (generation, rewards, reference log-probs)"
	if parts.total > 0 {
		line += fmt.Sprintf(", %d of %d parts back", parts.back, parts.total)
	}
	if parts.waiting > 0 {
		line += fmt.Sprintf(", %d waiting for a stage actor (a worker node to join, or one to be free)", parts.waiting)
	}
	return line
}

// watchSteps shows what the step in flight is doing once it has run for
// every, and again every every (showBusy).
func (r *runner) watchSteps(ctx context.Context, total int64, every time.Duration) (stop func()) {
	return r.showBusy(ctx, every, func(ctx context.Context, now time.Time) (string, bool) {
		n, a, ok := r.trainer.oldest()
		if !ok || now.Sub(a.since) < every {
			return "", false
		}
		var parts partsInFlight
		if a.phase == making {
			parts = r.trainer.stages.parts(ctx)
		}
		return busyLine(n, total, a, parts, now), true
	})
}

// chore is a piece of the run's end that can take long (the final
// checkpoint, the final evaluation): its name, what it does, and since
// when.
type chore struct {
	name, what string
	since      time.Time
}

// beginChore records that the run's end has begun chore name, which does
// what.
func (r *runner) beginChore(name, what string) {
	r.chore.Store(&chore{name: name, what: what, since: time.Now()})
}

// watchEnd shows what the run's end is doing (beginChore) once a chore has run
// for every, and again every every (showBusy).
func (r *runner) watchEnd(ctx context.Context, every time.Duration) (stop func()) {
	return r.showBusy(ctx, every, func(_ context.Context, now time.Time) (string, bool) {
		c := r.chore.Load()
		if c == nil || now.Sub(c.since) < every {
			return "", false
		}
		return fmt.Sprintf("%s running for %s: %s", c.name, runlog.FormatETA(now.Sub(c.since)), c.what), true
	})
}

// showBusy shows status's line (Progress.Busy) at most every every, looking
// five times an every, until the returned stop is called, which blanks a
// terminal's line if it shows one (Progress.EndBusy) and may be called
// again. status reports false when there is nothing to show. every 0
// shows nothing.
func (r *runner) showBusy(ctx context.Context, every time.Duration, status func(ctx context.Context, now time.Time) (line string, ok bool)) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	over := make(chan struct{})
	go func() {
		defer close(over)
		tick := time.NewTicker(every / 5)
		defer tick.Stop()
		var shown time.Time // when a line was last shown
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if now.Sub(shown) < every {
					continue
				}
				if line, ok := status(ctx, now); ok {
					r.progress.Busy(line)
					shown = now
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-over
			r.progress.EndBusy()
		})
	}
}

// busyEvery is how often the run says what a long step is doing on its
// progress output.
func busyEvery(p *runlog.Progress) time.Duration {
	if p.Terminal() {
		return busyTerminal
	}
	return busyLog
}
