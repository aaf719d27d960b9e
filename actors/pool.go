package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
)

// pool is a set of identical stage actors, children of the coordinator,
// that the parts of one stage's work are spread over.
type pool struct {
	name     string
	stage    messages.Stage
	pids     []*actor.PID
	props    []*actor.Props // how each member was made, to replace it (coordinator.replace)
	replaced int            // members replaced so far, for fresh names
	timeout  time.Duration  // per request
	retries  int            // extra tries per part after a timeout or dead letter
	// stateful members (learner, controller) change state on every request:
	// a part that gets no answer is an error that ends the run, not a skip.
	stateful bool
}

// gather collects the replies of one scatter.
type gather struct {
	replies []any
	left    int
	over    bool
	done    func(replies []any, err error)
}

// scatter sends parts[i] to member i mod n and calls done exactly once, on
// the calling actor's goroutine: with the replies in part order, or with
// the first error (a *SkipError: the stage's own, or a part that timed out or hit a dead
// letter on all of its retries+1 tries, each try on the next member).
// Every request has a timeout, so done is always called.
func (p *pool) scatter(c actor.Context, parts []any, done func(replies []any, err error)) {
	if len(parts) == 0 {
		done(nil, nil)
		return
	}
	g := &gather{replies: make([]any, len(parts)), left: len(parts), done: done}
	for i, part := range parts {
		p.send(c, g, i, part, 0)
	}
}

// send makes try number try of part i.
func (p *pool) send(c actor.Context, g *gather, i int, part any, try int) {
	pid := p.pids[(i+try)%len(p.pids)]
	f := c.RequestFuture(pid, part, p.timeout)
	c.ReenterAfter(f, func(res any, err error) {
		if g.over {
			return
		}
		if err != nil {
			if try < p.retries {
				p.send(c, g, i, part, try+1)
				return
			}
			g.over = true
			if p.stateful {
				g.done(nil, fmt.Errorf("%s: %w within %v (cluster.request_timeout): %w", p.name, ErrNoAnswer, p.timeout, err))
				return
			}
			cause, reason := ErrTimeout, messages.SkipReason_TIMEOUT
			if errors.Is(err, actor.ErrDeadLetter) {
				cause, reason = ErrActorFailed, messages.SkipReason_ACTOR_FAILED
			}
			g.done(nil, &SkipError{Stage: p.stage, Reason: reason,
				Err: fmt.Errorf("%s: part %d failed %d times: %w: %w", p.name, i, try+1, cause, err)})
			return
		}
		if n, ok := res.(*messages.SkipNotice); ok {
			g.over = true
			g.done(nil, fromNotice(n))
			return
		}
		g.replies[i] = res
		g.left--
		if g.left == 0 {
			g.over = true
			g.done(g.replies, nil)
		}
	})
}
