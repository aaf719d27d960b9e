package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/mgrpo/mgrpo/actors/trace"
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
			p.pool.members = append(p.pool.members, &member{pid: c.Spawn(props)})
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
	sys := NewSystem(nil, nil)
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

// holdChild answers its int after a value arrives on release (a node that
// hangs, then wakes up), tagging the answer with its name.
type holdChild struct {
	name    string
	release chan struct{}
}

func (h *holdChild) Receive(c actor.Context) {
	if n, ok := c.Message().(int); ok {
		if h.release != nil {
			<-h.release
		}
		c.Respond(fmt.Sprintf("%s:%d", h.name, n))
	}
}

// dynamicParent starts with an empty pool; "add NAME" adds a child, "drop"
// removes the first member, and []any is scattered.
type dynamicParent struct {
	pool    *pool
	release chan struct{}
	need    int    // the pool's need
	hedge   bool   // the pool's hedge
	node    string // every member's node ("": each its own, n-NAME)
}

func (p *dynamicParent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		p.pool = &pool{name: "dyn", timeout: time.Minute, need: p.need, hedge: p.hedge}
	case string:
		switch m {
		case "drop":
			p.pool.remove(c, p.pool.members[0].pid)
			c.Respond(p.pool.reissued)
			return
		case "waiting":
			c.Respond(len(p.pool.waiting))
			return
		case "state":
			busy := 0
			for _, m := range p.pool.members {
				busy += m.busy
			}
			c.Respond([3]int{p.pool.hedged, len(p.pool.running), busy})
			return
		}
		var release chan struct{}
		if m == "add held" {
			release = p.release
		}
		pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &holdChild{name: m[4:], release: release} }))
		node := p.node
		if node == "" {
			node = "n-" + m[4:]
		}
		p.pool.add(c, &member{pid: pid, node: node})
		c.Respond(len(p.pool.members))
	case []any:
		sender := c.Sender()
		p.pool.scatter(c, m, func(replies []any, err error) { c.Send(sender, &scatterResult{replies, err}) })
	}
}

// TestPoolWaitsAndReissues: parts sent to an empty pool wait for a member;
// a part whose member leaves (a node that hangs) goes to another member at
// once, and when the first one answers late, its answer is ignored: every
// part counts exactly once.
func TestPoolWaitsAndReissues(t *testing.T) {
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	release := make(chan struct{})
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &dynamicParent{release: release} }))
	result := sys.Root.RequestFuture(parent, []any{1, 2}, time.Minute)
	ask := asker(t, sys, parent)
	ask("add held") // both parts go to the held member and hang there
	ask("add fresh")
	if n := ask("drop"); n != 2 {
		t.Fatalf("%v parts reissued when the held member left, want 2", n)
	}
	res, err := result.Result()
	if err != nil {
		t.Fatal(err)
	}
	r := res.(*scatterResult)
	if r.err != nil || r.replies[0] != "fresh:1" || r.replies[1] != "fresh:2" {
		t.Fatalf("replies %v (%v), want both from the member that stayed", r.replies, r.err)
	}
	close(release) // the dropped member wakes up and answers: nothing changes
	if n := ask("add other"); n != 2 {
		t.Fatalf("pool has %v members, want 2", n)
	}
}

// TestPoolNeedsMembersToStart: a pool that needs 2 members holds its
// parts while it has 1, sends them when the second joins, and, once
// started, goes on with 1 when a member leaves.
func TestPoolNeedsMembersToStart(t *testing.T) {
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &dynamicParent{need: 2} }))
	ask := asker(t, sys, parent)
	result := sys.Root.RequestFuture(parent, []any{1, 2}, time.Minute)
	ask("add a")
	if n := ask("waiting"); n != 2 {
		t.Fatalf("%v parts waiting with 1 of 2 members, want 2", n)
	}
	ask("add b")
	if n := ask("waiting"); n != 0 {
		t.Fatalf("%v parts waiting with 2 of 2 members, want 0", n)
	}
	if res, err := result.Result(); err != nil || res.(*scatterResult).err != nil {
		t.Fatalf("scatter: %v %v", err, res)
	}
	ask("drop")
	r, ok := ask([]any{3}).(*scatterResult)
	if !ok || r.err != nil || r.replies[0] != "b:3" {
		t.Fatalf("after a member left: %+v, want b's answer at once", r)
	}
}

// tracedParent is dynamicParent's traced twin: its pool starts empty and
// traces, "add" adds a member that answers every part with "ok", and []any
// is scattered.
type tracedParent struct {
	pool   *pool
	tracer oteltrace.Tracer
}

func (p *tracedParent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		p.pool = &pool{name: "gen", timeout: time.Minute, tracer: p.tracer}
	case string:
		pid := c.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(messages.Header); ok {
				c.Respond("ok")
			}
		}))
		p.pool.add(c, &member{pid: pid})
		c.Respond(len(p.pool.members))
	case []any:
		sender := c.Sender()
		p.pool.scatter(c, m, func(replies []any, err error) { c.Send(sender, &scatterResult{replies, err}) })
	}
}

// TestPoolTracesTheWait: a part that finds the pool empty has a
// "<pool>.wait" span, a child of the part's span, that ends when a member
// joins, before the part's request span starts; a part that finds a member
// has none.
func TestPoolTracesTheWait(t *testing.T) {
	tr, exp := memoryTracer(1)
	ctx, root := tr.Start(context.Background(), "stage")
	part := &messages.PromptBatch{Meta: trace.WithSpan(ctx, &messages.StepMeta{Step: 1})}
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &tracedParent{tracer: tr} }))
	result := sys.Root.RequestFuture(parent, []any{part}, time.Minute)
	joined := time.Now() // the member joins after this; the part, sent first, waits for it
	if _, err := sys.Root.RequestFuture(parent, "add", 10*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if res, err := result.Result(); err != nil || res.(*scatterResult).err != nil {
		t.Fatalf("scatter: %v %v", err, res)
	}
	if res, err := sys.Root.RequestFuture(parent, []any{part}, 10*time.Second).Result(); err != nil || res.(*scatterResult).err != nil {
		t.Fatalf("second scatter: %v %v", err, res)
	}
	root.End()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = append(byName[s.Name], s)
	}
	waits, reqs := byName["gen.wait"], byName["gen.request"]
	if len(waits) != 1 || len(reqs) != 2 {
		t.Fatalf("%d wait and %d request spans, want 1 and 2 (the second part found a member)", len(waits), len(reqs))
	}
	w := waits[0]
	if w.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("the wait's parent is %v, want the part's span %v", w.Parent.SpanID(), root.SpanContext().SpanID())
	}
	first := reqs[0]
	if reqs[1].StartTime.Before(first.StartTime) {
		first = reqs[1]
	}
	if w.EndTime.Before(joined) || w.EndTime.After(first.StartTime) {
		t.Errorf("the wait ran %v..%v, want it to end after the member's joining at %v and before the request at %v",
			w.StartTime, w.EndTime, joined, first.StartTime)
	}
}

// relayScorer is a reward evaluator of node: it answers Rollouts with a
// Scored naming it (on node "bad", with a string), and a Relay by handing
// that Scored to the actor named next, beside it, as a request from the
// relay's sender (as rewardActor). A held one answers nothing until
// release is closed.
type relayScorer struct {
	node    string
	release chan struct{}
}

func (r *relayScorer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.Rollouts:
		if r.node == "bad" { // a node that answers what is not a step message
			c.Respond("scored")
			return
		}
		c.Respond(r.scored(m, false))
	case *messages.Relay:
		c.RequestWithCustomSender(actor.NewPID(c.Self().GetAddress(), m.GetNext()), r.scored(m.GetRollouts(), true), c.Sender())
	}
}

// scored waits for release (if held) and names the scorer, and whether
// the part came as a relay, in the Scored's reward names.
func (r *relayScorer) scored(ro *messages.Rollouts, relayed bool) *messages.Scored {
	if r.release != nil {
		<-r.release
	}
	return &messages.Scored{Meta: messages.DeriveMeta(ro.GetMeta()), Rollouts: ro, RewardNames: []string{r.node, fmt.Sprint(relayed)}}
}

// relayReferee is a reference scorer of node: it answers a Scored with a
// RefScored whose batch id names it (after release, if held).
type relayReferee struct {
	node    string
	release chan struct{}
}

func (r *relayReferee) Receive(c actor.Context) {
	if sc, ok := c.Message().(*messages.Scored); ok {
		if r.release != nil {
			<-r.release
		}
		c.Respond(&messages.RefScored{Meta: &messages.StepMeta{BatchId: r.node}, Scored: sc})
	}
}

// relayParent holds a reward pool and a reference pool, as the
// coordinator does. Commands: "rew NODE" and "ref NODE" add a member on
// NODE ("... held": one that answers only after "release"); "lose rew
// NODE" and "lose ref NODE" take that stage's first member on NODE out (a
// stopped actor), "drop NODE" every member of NODE (a lost node);
// "gen NODE" adds a generator (relayGenerator); "hedge" turns hedging on
// in every pool, and "state" answers with what the pools hold
// (relayParent.state); []any is scattered over the reward pool, each
// answer going on to the reference pool, and a chainParts over the
// generators, relayed through both.
type relayParent struct {
	gen, rew, ref *pool
	release       chan struct{}
	released      bool
}

func (p *relayParent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		p.rew = &pool{name: "rew", stage: messages.Stage_REWARD, timeout: time.Minute, retries: 1}
		p.ref = &pool{name: "ref", stage: messages.Stage_REFERENCE, timeout: time.Minute, retries: 1}
		p.gen = &pool{name: "gen", stage: messages.Stage_GENERATE, timeout: time.Minute, retries: 1}
	case string:
		if m == "state" {
			c.Respond(p.state())
			return
		}
		p.command(c, strings.Fields(m))
		c.Respond(true)
	case []any:
		sender := c.Sender()
		p.rew.scatterThen(c, m, p.ref, func(replies []any, err error) { c.Send(sender, &scatterResult{replies, err}) })
	case chainParts:
		sender := c.Sender()
		p.gen.relayTo(c, m, []*pool{p.rew, p.ref}, func(replies []any, err error) { c.Send(sender, &scatterResult{replies, err}) })
	}
}

func (p *relayParent) command(c actor.Context, cmd []string) {
	var release chan struct{}
	if len(cmd) == 3 && cmd[2] == "held" {
		release = p.release
	}
	switch cmd[0] {
	case "rew":
		pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &relayScorer{node: cmd[1], release: release} }))
		p.rew.add(c, &member{pid: pid, node: cmd[1]})
	case "ref":
		pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &relayReferee{node: cmd[1], release: release} }))
		p.ref.add(c, &member{pid: pid, node: cmd[1]})
	case "gen":
		pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &relayGenerator{node: cmd[1], release: release} }))
		p.gen.add(c, &member{pid: pid, node: cmd[1]})
	case "lose", "drop":
		var lost []*actor.PID
		for _, q := range []*pool{p.gen, p.rew, p.ref} {
			for _, m := range q.members {
				if m.node == cmd[len(cmd)-1] && (cmd[0] == "drop" || cmd[1] == q.name && len(lost) == 0) {
					lost = append(lost, m.pid)
				}
			}
		}
		for _, pid := range lost { // as the coordinator: every pool left before any part goes again
			for _, q := range []*pool{p.gen, p.rew, p.ref} {
				q.leave(pid)
			}
		}
		for _, pid := range lost {
			for _, q := range []*pool{p.gen, p.rew, p.ref} {
				q.reissue(c, pid)
			}
		}
	case "hedge":
		p.gen.hedge, p.rew.hedge, p.ref.hedge = true, true, true
	case "release":
		if !p.released {
			close(p.release)
			p.released = true
		}
	}
}

// state names the parts the generator pool hedged, how many parts its
// three pools' members are busy with, and the members marked late (pool
// and node): "hedged 1, busy 3, late [gen:k rew:a ref:a]".
func (p *relayParent) state() string {
	busy, late := 0, []string{}
	for _, q := range []*pool{p.gen, p.rew, p.ref} {
		for _, m := range q.members {
			busy += m.busy
			if m.late > 0 {
				late = append(late, q.name+":"+m.node)
			}
		}
	}
	return fmt.Sprintf("hedged %d, busy %d, late %v", p.gen.hedged, busy, late)
}

// relayGenerator is a generator of node: it answers PromptBatch with
// Rollouts whose batch id names it, and a Chain by relaying them to the
// reward evaluator it names (as generatorActor), except on node "short",
// whose rollouts count as incomplete and answer the chain. A held one
// answers nothing until release is closed.
type relayGenerator struct {
	node    string
	release chan struct{}
}

func (r *relayGenerator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PromptBatch:
		c.Respond(r.rollouts(m))
	case *messages.Chain:
		ro := r.rollouts(m.GetPrompts())
		if r.node == "short" {
			c.Respond(ro)
			return
		}
		c.RequestWithCustomSender(actor.NewPID(m.GetAddress(), m.GetReward()),
			&messages.Relay{Meta: ro.GetMeta(), Rollouts: ro, Next: m.GetReference()}, c.Sender())
	}
}

func (r *relayGenerator) rollouts(pb *messages.PromptBatch) *messages.Rollouts {
	if r.release != nil {
		<-r.release
	}
	return &messages.Rollouts{Meta: &messages.StepMeta{Step: pb.GetMeta().GetStep(), BatchId: r.node}}
}

// chainParts are parts for relayParent's generators, to be relayed.
type chainParts []any

// runRelay starts a relayParent, runs setup, scatters parts, runs during
// while the scatter is in flight, and returns its result.
func runRelay(t *testing.T, parts int, setup, during []string) *scatterResult {
	t.Helper()
	return runParent(t, numbered(parts, func(m *messages.StepMeta) any { return &messages.Rollouts{Meta: m} }), setup, during)
}

// runChain is runRelay for parts that start at the generators.
func runChain(t *testing.T, parts int, setup, during []string) *scatterResult {
	t.Helper()
	return runParent(t, chainParts(numbered(parts, func(m *messages.StepMeta) any { return &messages.PromptBatch{Meta: m} })), setup, during)
}

// numbered makes n parts, part i with step i in its header.
func numbered(n int, part func(*messages.StepMeta) any) []any {
	ps := make([]any, n)
	for i := range ps {
		ps[i] = part(&messages.StepMeta{Step: int64(i)})
	}
	return ps
}

// runParent starts a relayParent, runs setup, sends it parts, runs during
// while they are in flight, and returns the result.
func runParent(t *testing.T, parts any, setup, during []string) *scatterResult {
	t.Helper()
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &relayParent{release: make(chan struct{})} }))
	defer sys.Root.Send(parent, "release")
	ask := asker(t, sys, parent)
	for _, cmd := range setup {
		ask(cmd)
	}
	result := sys.Root.RequestFuture(parent, parts, time.Minute)
	for _, cmd := range during {
		ask(cmd)
	}
	res, err := result.Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*scatterResult)
}

// TestPoolRelays: a part goes to a reward member, and its Scored to a
// reference member beside it (relayed by the reward member: one trip) or,
// with none beside it, to any reference member once answered; a part
// whose reward member or relay target is lost goes again (relayed or not,
// as the members then present allow), and a late answer to the lost try
// is ignored: every part gets exactly one answer, of the last try.
func TestPoolRelays(t *testing.T) {
	cases := []struct {
		name          string
		setup, during []string
		scorer, ref   string // the node of every part's reward and reference member
		relayed       bool
	}{
		{"relayed beside", []string{"rew a", "ref a"}, nil, "a", "a", true},
		{"no reference beside", []string{"rew a", "ref b"}, nil, "a", "b", false},
		{"reference joins later", []string{"rew a"}, []string{"ref b"}, "a", "b", false},
		{"node lost mid-relay", []string{"rew h held", "ref h"}, []string{"drop h", "release", "ref b", "rew b"}, "b", "b", true},
		{"relay target lost", []string{"rew a", "ref a held"}, []string{"lose ref a", "release", "ref c"}, "a", "c", false},
		{"relay target lost, another beside", []string{"rew a", "ref a held"}, []string{"ref a", "lose ref a", "release"}, "a", "a", true},
		{"scorer lost, reference stays", []string{"rew h held", "ref h"}, []string{"lose rew h", "release", "rew h"}, "h", "h", true},
		{"answer lost, coordinator's chain", []string{"rew a", "ref b held"}, []string{"drop b", "release", "ref c"}, "a", "c", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runRelay(t, 3, tc.setup, tc.during)
			if r.err != nil || len(r.replies) != 3 {
				t.Fatalf("replies %v, err %v", r.replies, r.err)
			}
			for i, x := range r.replies {
				rs, ok := x.(*messages.RefScored)
				if !ok {
					t.Fatalf("part %d answered %T, want a RefScored", i, x)
				}
				got := []string{rs.GetScored().GetRewardNames()[0], rs.GetMeta().GetBatchId(), rs.GetScored().GetRewardNames()[1]}
				if want := []string{tc.scorer, tc.ref, fmt.Sprint(tc.relayed)}; !slices.Equal(got, want) {
					t.Errorf("part %d: scored on, reference on, relayed = %v, want %v", i, got, want)
				}
				if step := rs.GetScored().GetRollouts().GetMeta().GetStep(); step != int64(i) {
					t.Errorf("part %d holds part %d", i, step)
				}
			}
		})
	}
}

// TestPoolForwardsStepMessages: an answer that is not a step message is
// not sent on to the next stage: the step is skipped as a shape mismatch.
func TestPoolForwardsStepMessages(t *testing.T) {
	r := runRelay(t, 2, []string{"rew bad", "ref b"}, nil)
	var s *SkipError
	if !errors.As(r.err, &s) || s.Stage != messages.Stage_REWARD || s.Reason != messages.SkipReason_SHAPE_MISMATCH {
		t.Fatalf("err = %v, want a REWARD/SHAPE_MISMATCH skip", r.err)
	}
}

// TestPoolChains: a part goes to a generator whose Rollouts are relayed to
// a reward evaluator (on any node) with a reference scorer beside it, and
// its RefScored answers the part; with no such pair, or rollouts that
// answer the chain themselves, the part's answer is its Rollouts. A part
// whose generator, reward evaluator or reference scorer is lost goes again
// (through the members then present), and a late answer to the lost try
// is ignored: every part gets exactly one answer, of the last try.
func TestPoolChains(t *testing.T) {
	cases := []struct {
		name          string
		setup, during []string
		gen           string // the node of every part's generator
		scorer, ref   string // ... reward and reference member; "": answered with its Rollouts
	}{
		{"chained to another node", []string{"gen g", "rew a", "ref a"}, nil, "g", "a", "a"},
		{"the reward evaluator with a reference beside", []string{"gen g", "rew a", "ref b", "rew b"}, nil, "g", "b", "b"},
		{"no reference beside", []string{"gen g", "rew a", "ref b"}, nil, "g", "", ""},
		{"no reward evaluator", []string{"gen g", "ref a"}, nil, "g", "", ""},
		{"rollouts answer the chain", []string{"gen short", "rew a", "ref a"}, nil, "short", "", ""},
		{"generator lost", []string{"gen g held", "rew a", "ref a"}, []string{"gen k", "lose gen g", "release"}, "k", "a", "a"},
		{"reward node lost", []string{"gen g", "rew h held", "ref h"}, []string{"rew b", "ref b", "drop h", "release"}, "g", "b", "b"},
		{"reference lost", []string{"gen g", "rew a", "ref a held"}, []string{"rew c", "ref c", "lose ref a", "release"}, "g", "c", "c"},
		{"reward node lost, none left", []string{"gen g", "rew h held", "ref h"}, []string{"drop h", "release"}, "g", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runChain(t, 3, tc.setup, tc.during)
			if r.err != nil || len(r.replies) != 3 {
				t.Fatalf("replies %v, err %v", r.replies, r.err)
			}
			for i, x := range r.replies {
				var ro *messages.Rollouts
				var got []string
				switch v := x.(type) {
				case *messages.RefScored:
					ro = v.GetScored().GetRollouts()
					got = []string{ro.GetMeta().GetBatchId(), v.GetScored().GetRewardNames()[0], v.GetMeta().GetBatchId(), v.GetScored().GetRewardNames()[1]}
				case *messages.Rollouts:
					ro = v
					got = []string{ro.GetMeta().GetBatchId(), "", "", "true"}
				default:
					t.Fatalf("part %d answered %T", i, x)
				}
				if want := []string{tc.gen, tc.scorer, tc.ref, "true"}; !slices.Equal(got, want) {
					t.Errorf("part %d: generated on, scored on, reference on, relayed = %v, want %v", i, got, want)
				}
				if step := ro.GetMeta().GetStep(); step != int64(i) {
					t.Errorf("part %d holds part %d", i, step)
				}
			}
		})
	}
}

// TestPoolWaits: a try waits for its stage's timeout, and a relayed one
// for the timeouts of every stage it goes through.
func TestPoolWaits(t *testing.T) {
	gen := &pool{timeout: time.Minute}
	rew, ref := &pool{timeout: 2 * time.Second}, &pool{timeout: 3 * time.Second}
	for _, tc := range []struct {
		name string
		t    *task
		want time.Duration
	}{
		{"alone", &task{}, time.Minute},
		{"answer goes on, not relayed", &task{then: []*pool{rew, ref}}, time.Minute},
		{"relayed through two stages", &task{then: []*pool{rew, ref}, via: []*member{{}, {}}}, time.Minute + 5*time.Second},
	} {
		if got := gen.waits(tc.t); got != tc.want {
			t.Errorf("%s: waits %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPoolHedges: with cluster.hedge, a part that hangs on one node while
// a member of another node is idle is sent there too after hedgeMin (the
// fastest node answers in microseconds), and its answer counts; the hung
// member's late answer is ignored and nothing stays counted as running.
// Members of one node never hedge: the part waits for its member.
func TestPoolHedges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hedge bool
		node  string
		want  []any
	}{
		{"two nodes", true, "", []any{"fresh:1", "fresh:2"}},
		{"hedge off", false, "", []any{"fresh:1", "held:2"}},
		{"one node", true, "n", []any{"fresh:1", "held:2"}},
	} {
		sys := NewSystem(nil, nil)
		release := make(chan struct{})
		parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &dynamicParent{release: release, hedge: tc.hedge, node: tc.node}
		}))
		ask := asker(t, sys, parent, tc.name)
		ask("add fresh")
		ask("add held")
		ask([]any{1}) // to fresh: the pool learns how fast its node answers
		result := sys.Root.RequestFuture(parent, []any{1, 2}, time.Minute)
		if !tc.hedge || tc.node != "" {
			time.Sleep(10 * hedgeMin) // a hedge would have been sent by now
			close(release)
		}
		res, err := result.Result()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r := res.(*scatterResult); r.err != nil || !slices.Equal(r.replies, tc.want) {
			t.Errorf("%s: replies %v (%v), want %v", tc.name, r.replies, r.err, tc.want)
		}
		hedged := 0
		if tc.hedge && tc.node == "" {
			hedged = 1
			// The hung member stays busy with the part it holds (no new
			// part goes to it while another member is free) until it
			// answers, late: that answer is ignored.
			// Two parts: the second would go to the hung member (as busy
			// as the other once the first is sent) and be hedged in turn.
			if r := ask([]any{5, 6}).(*scatterResult); r.err != nil || !slices.Equal(r.replies, []any{"fresh:5", "fresh:6"}) {
				t.Errorf("%s: parts while the hung member holds one: %v (%v), want fresh:5 and fresh:6", tc.name, r.replies, r.err)
			}
			if st := ask("state").([3]int); st != [3]int{1, 0, 1} {
				t.Errorf("%s: before the late answer: hedged %d (a part sent to the hung member is hedged too), running %d, busy %d; want 1, 0, 1",
					tc.name, st[0], st[1], st[2])
			}
			close(release)
		}
		st := ask("state").([3]int)
		for deadline := time.Now().Add(10 * time.Second); st[2] != 0 && time.Now().Before(deadline); st = ask("state").([3]int) {
			time.Sleep(time.Millisecond)
		}
		if st != [3]int{hedged, 0, 0} {
			t.Errorf("%s: hedged %d, running %d, busy %d; want %d, 0, 0", tc.name, st[0], st[1], st[2], hedged)
		}
		sys.Shutdown()
	}
}

// TestPoolHedgesChains: a chained part whose reward evaluator hangs is
// hedged, once the pool knows its nodes' times, on a chain that avoids
// the hung node: another reward+reference node, through an idle generator
// of the same node when there is only one generator node, and its answer
// counts; the hung try's members on nodes the hedge did not go through
// are marked late and stay busy until it answers, and parts sent while it
// holds its part are relayed to the other reward node (not hedged: three,
// so that the hung one would be the least busy for the third). With one
// reward node, no chain avoids a node of the hung try's: nothing is
// hedged and the part waits for its answer. Parts not hedged take route's
// usual way (the least busy reward evaluator: b for the first part).
func TestPoolHedgesChains(t *testing.T) {
	for _, tc := range []struct {
		name       string
		warm, then []string // commands before and after a first part that times the generator node
		want       []string // each part's generator and reward node
		hedged     string   // the state once the parts are answered, before the hung member answers
	}{
		{"one generator node", []string{"gen g", "gen g", "rew b", "ref b"}, []string{"rew a held", "ref a"},
			[]string{"g b", "g b"}, "hedged 1, busy 3, late [rew:a ref:a]"},
		{"another generator node", []string{"gen g", "gen k", "rew b", "ref b"}, []string{"rew a held", "ref a"},
			[]string{"g b", "g b"}, "hedged 1, busy 3, late [gen:k rew:a ref:a]"},
		{"one generator", []string{"gen g", "rew b", "ref b"}, []string{"rew a held", "ref a"},
			[]string{"g b", "g b"}, "hedged 1, busy 3, late [rew:a ref:a]"},
		{"one reward node", []string{"gen g", "gen g", "rew w", "ref w"}, []string{"drop w", "rew a held", "ref a"},
			[]string{"g a", "g a"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, hedged, more := runHedgedChain(t, tc.warm, tc.then, tc.hedged == "")
			if !slices.Equal(got, tc.want) {
				t.Errorf("parts went through %q, want %q", got, tc.want)
			}
			if hedged != tc.hedged {
				t.Errorf("state after the answer: %q, want %q", hedged, tc.hedged)
			}
			if want := []string{"g b", "g b", "g b"}; tc.hedged != "" && !slices.Equal(more, want) {
				t.Errorf("parts sent while the hung member holds one went through %q, want %q", more, want)
			}
		})
	}
}

// runHedgedChain starts a hedging relayParent, runs warm, has it answer a
// first chained part, runs then, and sends two chained parts; unless the
// pool is to hedge, it waits for a hedge that should not come and releases
// the held members. It returns each part's generator and reward node, the
// state after the answer and the nodes of three parts sent then, before
// the held members answer (none when it waited), and requires every member
// free once the held ones answer.
func runHedgedChain(t *testing.T, warm, then []string, wait bool) (nodes []string, hedged string, more []string) {
	t.Helper()
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &relayParent{release: make(chan struct{})} }))
	defer sys.Root.Send(parent, "release")
	ask := asker(t, sys, parent)
	for _, cmd := range append([]string{"hedge"}, warm...) {
		ask(cmd)
	}
	ask(chainParts(numbered(1, func(m *messages.StepMeta) any { return &messages.PromptBatch{Meta: m} })))
	for _, cmd := range then {
		ask(cmd)
	}
	chain := func(n int) []string {
		t.Helper()
		result := sys.Root.RequestFuture(parent, chainParts(numbered(n, func(m *messages.StepMeta) any { return &messages.PromptBatch{Meta: m} })), 5*time.Second)
		if wait {
			time.Sleep(10 * hedgeMin) // a hedge would have been sent by now
			ask("release")
		}
		res, err := result.Result()
		if err != nil {
			t.Fatalf("no answer (no hedge?): %v", err)
		}
		r := res.(*scatterResult)
		if r.err != nil {
			t.Fatalf("parts failed: %v", r.err)
		}
		var nodes []string
		for _, x := range r.replies {
			rs := x.(*messages.RefScored)
			nodes = append(nodes, rs.GetScored().GetRollouts().GetMeta().GetBatchId()+" "+rs.GetScored().GetRewardNames()[0])
		}
		return nodes
	}
	nodes = chain(2)
	if !wait {
		hedged = ask("state").(string)
		more = chain(3)
		ask("release")
	}
	want := "hedged 1, busy 0, late []"
	if wait {
		want = "hedged 0, busy 0, late []"
	}
	st := ask("state").(string)
	for deadline := time.Now().Add(10 * time.Second); st != want && time.Now().Before(deadline); st = ask("state").(string) {
		time.Sleep(time.Millisecond)
	}
	if st != want {
		t.Errorf("once the held members answered: %q, want %q", st, want)
	}
	return nodes, hedged, more
}

// members makes a pool's members from a spec: one "node", "node:busy"
// or "node:busy:late" a member, "." for this process.
func members(spec string) []*member {
	var ms []*member
	for _, f := range strings.Fields(spec) {
		fs := strings.Split(f, ":")
		m := &member{node: strings.TrimPrefix(fs[0], ".")}
		if len(fs) > 1 {
			fmt.Sscan(fs[1], &m.busy)
		}
		if len(fs) > 2 {
			fmt.Sscan(fs[2], &m.late)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestPoolHedgeWay: the way a hedge of a slow try goes (the try on the
// first generator, relayed through the first reward evaluator and the
// reference scorer beside it) goes through as few of the try's nodes as
// an idle member allows, never along the same nodes stage by stage;
// whether some way, busy or not, avoids one decides whether the pool
// looks at all.
func TestPoolHedgeWay(t *testing.T) {
	for _, tc := range []struct {
		name          string
		gen, rew, ref string // members (members); rew "": the part is not relayed
		want          string // the hedge's nodes; "": none
		any           bool   // some way avoids a node of the try, busy or not
	}{
		{"reward node slow, one generator node", "g:1 g", "a:1 b", "a:1 b", "g→b→b", true},
		{"a generator of another node idle too", "g:1 g k", "a:1 b", "a:1 b", "k→b→b", true},
		{"the least busy other reward node", "g:1 g", "a:1 b:2 c", "a:1 b:2 c", "g→c→c", true},
		{"generator node slow, one reward node", "g:1 k", "a:1", "a:1", "k→a→a", true},
		{"only the try's nodes", "g:1 g", "a:1", "a:1", "", false},
		{"no reference beside the other reward node", "g:1 g", "a:1 b", "a:1", "", false},
		{"no member idle", "g:1 g:1", "a:1 b", "a:1 b", "", true},
		{"generator and reward node one node", "g:1 g", "g:1 b", "g:1 b", "g→b→b", true},
		{"one process", ".:1 .", ".:1", ".:1", "", false},
		{"relayed from this process to another node", ".:1 .", ".:1 b", ".:1 b", "local→b→b", true},
		{"not relayed: an idle member of another node", "g:1 g k", "", "", "k", true},
		{"not relayed: one node", "g:1 g", "", "", "", false},
	} {
		gen := &pool{members: members(tc.gen)}
		slow := &task{on: gen.members[0]}
		if tc.rew != "" {
			rew, ref := &pool{members: members(tc.rew)}, &pool{members: members(tc.ref)}
			slow.then, slow.via = []*pool{rew, ref}, []*member{rew.members[0], ref.members[0]}
		}
		got := ""
		if w, ok := gen.hedgeWay(slow, func(m *member) bool { return m.busy == 0 }); ok {
			got = w.String()
		}
		if got != tc.want || gen.canHedge(slow) != tc.any {
			t.Errorf("%s: hedge on %q (any way: %v), want %q (%v)", tc.name, got, gen.canHedge(slow), tc.want, tc.any)
		}
	}
}

// TestRoute: a part that a generator takes is relayed to the least busy
// reward evaluator with a reference scorer beside it (the first such when
// several are as busy; one holding a try its hedge superseded only when
// every one does), a reward evaluator's Scored to the reference scorer
// beside it; nil when there is none, or no next pool.
func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    string // the member's node
		then []string
		want string // the route's nodes and busy counts; "": none
	}{
		{"the least busy reward evaluator", "g", []string{"a:2 b:1 c:1", "a b c"}, "b:1 b:0"},
		{"one without a reference beside is skipped", "g", []string{"a:2 b:0", "a"}, "a:2 a:0"},
		{"as busy: the first", "g", []string{"a b", "b a"}, "a:0 a:0"},
		{"one holding a superseded try: the other", "g", []string{"a:1:1 b:3", "a b"}, "b:3 b:0"},
		{"every one holding one: the least busy", "g", []string{"a:2:1 b:1:1", "a b"}, "b:1 b:0"},
		{"none with a reference beside", "g", []string{"a", "b"}, ""},
		{"Scored to the reference beside", "a", []string{"b a:1 a:0"}, "a:0"},
		{"no reference beside", "a", []string{"b"}, ""},
	} {
		var then []*pool
		for _, spec := range tc.then {
			then = append(then, &pool{members: members(spec)})
		}
		var got []string
		for _, v := range route(&member{node: tc.m}, then, "") {
			got = append(got, fmt.Sprintf("%s:%d", v.node, v.busy))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: route %q, want %q", tc.name, strings.Join(got, " "), tc.want)
		}
	}
	if got := route(&member{node: "g"}, []*pool{nil}, ""); got != nil {
		t.Errorf("no next pool: route %v, want none", got)
	}
}

// asker returns a function that sends msg to parent and waits (10 s at
// most) for its answer, failing the test (its message led by context)
// when none comes.
func asker(t *testing.T, sys *actor.ActorSystem, parent *actor.PID, context ...string) func(msg any) any {
	lead := strings.Join(append(context, ""), ": ")
	return func(msg any) any {
		t.Helper()
		res, err := sys.Root.RequestFuture(parent, msg, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("%s%v: %v", lead, msg, err)
		}
		return res
	}
}
