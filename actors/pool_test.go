package actors

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
)

// echoChild doubles ints; it panics on its first message when the shared
// counter says so, and answers a stage failure for negative ints.
type echoChild struct{ panics *atomic.Int32 }

func (e *echoChild) Receive(c actor.Context) {
	n, ok := c.Message().(int)
	if !ok {
		return
	}
	if e.panics.Add(-1) >= 0 {
		panic("injected fault")
	}
	if n < 0 {
		c.Respond(notice(nil, "echo", skip(messages.Stage_REWARD, fmt.Errorf("negative: %w", ErrNonFiniteReward))))
		return
	}
	c.Respond(2 * n)
}

// scatterParent owns a pool of echo children and answers a []any of parts
// with the gathered replies (or the error).
type scatterParent struct {
	panics *atomic.Int32
	pool   *pool
}

type scatterResult struct {
	replies []any
	err     error
}

func (p *scatterParent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		props := actor.PropsFromProducer(func() actor.Actor { return &echoChild{panics: p.panics} })
		p.pool = &pool{name: "echo", timeout: 2 * time.Second, retries: 1}
		for range 2 {
			p.pool.pids = append(p.pool.pids, c.Spawn(props))
		}
	case []any:
		sender := c.Sender()
		p.pool.scatter(c, m, func(replies []any, err error) {
			c.Send(sender, &scatterResult{replies, err})
		})
	}
}

func runScatter(t *testing.T, panics int32, parts []any) *scatterResult {
	t.Helper()
	sys := NewSystem(nil)
	defer sys.Shutdown()
	var counter atomic.Int32
	counter.Store(panics)
	props := actor.PropsFromProducer(func() actor.Actor { return &scatterParent{panics: &counter} },
		actor.WithSupervisor(newResendStrategy(3, time.Minute, time.Millisecond)))
	parent := sys.Root.Spawn(props)
	res, err := sys.Root.RequestFuture(parent, parts, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("scatter: %v", err)
	}
	return res.(*scatterResult)
}

func TestScatterGathersInOrder(t *testing.T) {
	r := runScatter(t, 0, []any{1, 2, 3})
	if r.err != nil || len(r.replies) != 3 || r.replies[0] != 2 || r.replies[1] != 4 || r.replies[2] != 6 {
		t.Fatalf("replies = %v, err %v; want [2 4 6]", r.replies, r.err)
	}
}

func TestScatterSurvivesPanickingChild(t *testing.T) {
	// The first message panics: the child is restarted and the message re-sent.
	r := runScatter(t, 1, []any{5, 7})
	if r.err != nil || r.replies[0] != 10 || r.replies[1] != 14 {
		t.Fatalf("replies = %v, err %v; want [10 14]", r.replies, r.err)
	}
}

func TestScatterReportsStageFailure(t *testing.T) {
	r := runScatter(t, 0, []any{1, -1})
	var s *SkipError
	if !errors.As(r.err, &s) || s.Stage != messages.Stage_REWARD || s.Reason != messages.SkipReason_NON_FINITE_REWARD {
		t.Fatalf("err = %v, want a REWARD/NON_FINITE_REWARD skip", r.err)
	}
}
