package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/messages"
)

// member is one stage actor of a pool: a child of the coordinator, or an
// actor of a worker node that registered it.
type member struct {
	pid   *actor.PID
	node  string       // worker node id; "" for a local child
	props *actor.Props // how a local member was made, to replace it
	busy  int          // parts in flight on it
	late  int          // of those, tries superseded by a hedge that answered first without going through its node (hedge.go)
}

// pool is the set of stage actors that one stage's parts are spread over.
// Members come and go (local replacements, worker nodes registering or
// dying); parts that find the pool empty wait for a member.
type pool struct {
	name    string
	stage   messages.Stage
	members []*member
	timeout time.Duration // per request
	retries int           // extra tries per part after a timeout or dead letter
	// stateful members (learner, controller) change state on every request:
	// a part that gets no answer is an error that ends the run, not a skip.
	stateful bool
	waiting  []*task // parts waiting for a member
	// need holds every part back until the pool has this many members,
	// once (0 or 1: until it has one); add clears it when reached.
	need     int
	running  map[*task]bool      // parts sent and not yet answered
	late     map[*task][]*member // tries superseded by their hedge, not yet answered (their members stay busy), with the members marked late
	reissued int                 // parts sent again because their actor was lost
	tracer   oteltrace.Tracer
	meter    *meter.Instruments // records the queue depth after every change (nil: off)
	vet      *answerCheck       // checks every answer, shared by the coordinator's pools (badanswer.go); nil: none

	// hedge sends a part that runs long on one node to an idle member of
	// another node as well (hedge.go); took averages each node's answer
	// times; hedged counts the parts sent so.
	hedge   bool
	took    map[string]time.Duration
	hedged  int
	looking bool // a look for parts to hedge is scheduled
}

// gather collects the replies of one scatter.
type gather struct {
	replies []any
	left    int
	over    bool
	done    func(replies []any, err error)
	// forward sends an answer that was not relayed on to the next stage
	// (scatterThen); without it such an answer is the part's (relayTo).
	forward bool
}

// task is one try of one part.
type task struct {
	g    *gather
	i    int
	part any
	try  int
	then []*pool        // the stages the answer goes on to, in order (scatterThen, relayTo); nil: none
	on   *member        // nil while waiting
	via  []*member      // the members of then the part is relayed through, one a stage; nil: not relayed
	span oteltrace.Span // the request's span, from the send to the answer
	sent time.Time      // when this try was sent
	// sibling is the part's other try while both run (a hedge, or the try
	// it hedges); hedged: the part was hedged, and is not again.
	sibling *task
	hedged  bool
	wait    oteltrace.Span // from finding the pool empty to a member taking it; nil when it did not wait
	// avoid is a node this try keeps off, in every stage, wherever a
	// member of another node can take it (one that answered the part
	// malformed: badanswer.go); "" for none.
	avoid string
}

// scatter sends every part to a member and calls done exactly once, on
// the calling actor's goroutine: with the replies in part order, or with
// the first error (a *SkipError: the stage's own, or a part that timed out
// or hit a dead letter on all of its retries+1 tries, each on another
// member). A part whose member leaves the pool is sent again at once, and
// its late answer, if any, is ignored: each part counts once.
func (p *pool) scatter(c actor.Context, parts []any, done func(replies []any, err error)) {
	p.start(c, parts, nil, false, done)
}

// scatterThen is scatter with each part's answer going on to the pool
// then (nil: none), whose answer is the part's: a part whose member has a
// member of then beside it (on its node, or both in this process) is
// relayed there by the member itself (a Relay: one trip for both stages),
// any other goes to then once answered. Each stage keeps its timeout and
// retries, and each part still counts once.
func (p *pool) scatterThen(c actor.Context, parts []any, then *pool, done func(replies []any, err error)) {
	p.start(c, parts, []*pool{then}, true, done)
}

// relayTo is scatter with each part relayed, where it can be, through the
// stages then (a generator's Rollouts to a reward evaluator on any node,
// whose Scored goes to a reference scorer beside it: a Chain), the last
// one's answer being the part's; a part that cannot be relayed (no reward
// evaluator with a reference scorer beside it), or whose member answers
// itself, has its member's answer. A lost member on the way sends the
// part again, with a timeout of every stage on the way.
func (p *pool) relayTo(c actor.Context, parts []any, then []*pool, done func(replies []any, err error)) {
	p.start(c, parts, then, false, done)
}

// start sends every part of a scatter to a member.
func (p *pool) start(c actor.Context, parts []any, then []*pool, forward bool, done func(replies []any, err error)) {
	defer p.measure()
	if len(parts) == 0 {
		done(nil, nil)
		return
	}
	if len(then) == 1 && then[0] == nil {
		then = nil
	}
	g := &gather{replies: make([]any, len(parts)), left: len(parts), done: done, forward: forward}
	for i, part := range parts {
		p.dispatch(c, &task{g: g, i: i, part: part, then: then})
	}
}

// dispatch sends t to a member: member (i + try) mod n when all are
// equally busy, else the least busy, so parts spread over the pool; a
// member still holding a part whose hedge answered first (a slow or
// frozen node) only when every member does; with no member, or fewer than
// the pool needs to start with, t waits.
func (p *pool) dispatch(c actor.Context, t *task) {
	if len(p.members) == 0 || len(p.members) < p.need {
		if ctx, ok := p.partContext(t); ok && t.wait == nil {
			_, t.wait = p.tracer.Start(ctx, p.name+".wait", oteltrace.WithAttributes(attrPart.Int(t.i), attrTry.Int(t.try)))
		}
		p.waiting = append(p.waiting, t)
		return
	}
	endWait(t, "")
	members := avoiding(p.members, t.avoid, func(m *member) []*member { return []*member{m} })
	m := members[(t.i+t.try)%len(members)]
	for _, o := range members {
		if lighter(o, m) {
			m = o
		}
	}
	p.send(c, t, m, route(m, t.then, t.avoid))
}

// avoiding is xs without those of which some member (of those members
// lists) is on node avoid, or all of xs when that would leave none.
func avoiding[X any](xs []X, avoid string, members func(X) []*member) []X {
	if avoid == "" {
		return xs
	}
	var kept []X
	for _, x := range xs {
		if !slices.ContainsFunc(members(x), func(m *member) bool { return m.node == avoid }) {
			kept = append(kept, x)
		}
	}
	if len(kept) == 0 {
		return xs
	}
	return kept
}

// lighter reports whether a part is better sent to o than to m: o holds
// no try superseded by its hedge (a slow or frozen node: member.late)
// where m does, or both do or neither does and o is less busy.
func lighter(o, m *member) bool {
	return (o.late == 0 && m.late > 0) || ((o.late > 0) == (m.late > 0) && o.busy < m.busy)
}

// send sends try t to member m, relayed through via (one member a stage
// of t.then; nil: not relayed), and has its answer come to answered.
func (p *pool) send(c actor.Context, t *task, m *member, via []*member) {
	t.on, t.via = m, via
	for _, v := range append([]*member{m}, t.via...) {
		v.busy++
	}
	if p.running == nil {
		p.running = map[*task]bool{}
	}
	p.running[t] = true
	msg := t.part
	if ctx, ok := p.partContext(t); ok {
		// One request span per try, naming where it went; the actor's span
		// is its child, on whichever node.
		ctx, t.span = p.tracer.Start(ctx, p.name+".request",
			oteltrace.WithSpanKind(oteltrace.SpanKindProducer), oteltrace.WithAttributes(
				attrActor.String(m.pid.GetId()), attrNode.String(nodeName(m)), attrPart.Int(t.i), attrTry.Int(t.try)))
		if t.via != nil {
			t.span.SetAttributes(attrRelay.String(t.via[0].pid.GetId()))
		}
		if t.sibling != nil {
			t.span.AddEvent(fmt.Sprint("hedge of the try on ", wayOf(t.sibling)))
		}
		if h := t.part.(messages.Header); oteltrace.SpanContextFromContext(ctx).IsValid() {
			msg = messages.WithMeta(h, trace.WithSpan(ctx, h.GetMeta()))
		}
	}
	if t.via != nil {
		msg = relay(msg, t.via)
	}
	t.sent = time.Now()
	f := c.RequestFuture(m.pid, msg, p.waits(t))
	c.ReenterAfter(f, func(res any, err error) { p.answered(c, t, res, err) })
	p.watch(c)
}

// waits is how long a try of t waits for its answer: the stage's timeout,
// plus the timeout of every stage after it when the part is relayed
// through them.
func (p *pool) waits(t *task) time.Duration {
	timeout := p.timeout
	if t.via != nil {
		for _, q := range t.then {
			timeout += q.timeout
		}
	}
	return timeout
}

// beside returns the least busy member of p on m's node (both local
// members: both in this process), nil when p is nil or has none there.
func (p *pool) beside(m *member) *member {
	if p == nil {
		return nil
	}
	var best *member
	for _, o := range p.members {
		if o.node == m.node && (best == nil || o.busy < best.busy) {
			best = o
		}
	}
	return best
}

// route picks the members a part that m takes is relayed through, one
// for each stage of then, or returns nil when it cannot be relayed: of
// the routes there are (those off node avoid where there are such), the
// first whose first member is the lightest (a reward evaluator still
// holding a part whose hedge answered first only when every one does;
// else the least busy).
func route(m *member, then []*pool, avoid string) []*member {
	var best []*member
	for _, via := range avoiding(routes(m, then), avoid, func(via []*member) []*member { return via }) {
		if best == nil || lighter(via[0], best[0]) {
			best = via
		}
	}
	return best
}

// routes lists every way a part that m takes can be relayed through then,
// one member a stage: a reward evaluator's Scored goes to a reference
// scorer beside it (then: the reference pool); a generator's Rollouts go
// to any reward evaluator with a reference scorer beside it, on any node,
// and on to that scorer (then: the reward and reference pools). None when
// the part cannot be relayed.
func routes(m *member, then []*pool) [][]*member {
	if slices.Contains(then, nil) {
		return nil
	}
	var out [][]*member
	switch len(then) {
	case 1:
		if next := then[0].beside(m); next != nil {
			out = append(out, []*member{next})
		}
	case 2:
		for _, r := range then[0].members {
			if ref := then[1].beside(r); ref != nil {
				out = append(out, []*member{r, ref})
			}
		}
	}
	return out
}

// relay wraps part in the message that has its member hand the answer on
// through via: rollouts for a reward evaluator in a Relay, prompts for a
// generator in a Chain.
func relay(part any, via []*member) any {
	switch m := part.(type) {
	case *messages.Rollouts:
		return &messages.Relay{Meta: m.GetMeta(), Rollouts: m, Next: via[0].pid.GetId()}
	case *messages.PromptBatch:
		return &messages.Chain{Meta: m.GetMeta(), Prompts: m, Address: via[0].pid.GetAddress(),
			Reward: via[0].pid.GetId(), Reference: via[1].pid.GetId()}
	}
	panic(fmt.Sprintf("actors: relay of a %T", part)) // only reward and generator parts go on to other stages
}

// partContext is the trace context t's part carries, false when it
// carries none (or the pool does not trace).
func (p *pool) partContext(t *task) (context.Context, bool) {
	h, ok := t.part.(messages.Header)
	if !ok || p.tracer == nil || len(h.GetMeta().GetTrace()) == 0 {
		return nil, false
	}
	return trace.Extract(context.Background(), h.GetMeta()), true
}

// endWait ends the span of t's wait for a member, if it waited.
func endWait(t *task, event string) {
	if t.wait == nil {
		return
	}
	if event != "" {
		t.wait.AddEvent(event)
	}
	t.wait.End()
	t.wait = nil
}

// nodeName names where a member runs: its worker node, or this process.
func nodeName(m *member) string {
	if m.node != "" {
		return m.node
	}
	return "local"
}

// endTask ends t's span with what became of the try (err nil: answered).
func endTask(t *task, event string, err error) {
	if t.span == nil {
		return
	}
	if event != "" {
		t.span.AddEvent(event)
	}
	endSpan(t.span, err)
}

// answered handles the reply (or failure) of try t.
func (p *pool) answered(c actor.Context, t *task, res any, err error) {
	defer p.measure()
	if !p.running[t] {
		p.lateAnswer(t)
		return // reissued after its member left, or its hedge answered first: another try counts
	}
	p.release(t)
	if p.vetAnswer(c, t, res, err) {
		return // malformed: redone elsewhere, or its step ended (badanswer.go)
	}
	if err == nil {
		p.timeAnswer(t)
	}
	if p.settleHedge(t, err) {
		return
	}
	g := t.g
	if n, ok := res.(*messages.SkipNotice); ok && err == nil {
		endTask(t, "", fromNotice(n))
	} else if err != nil && t.try < p.retries {
		endTask(t, "retried on another actor", err)
	} else {
		endTask(t, "", err)
	}
	if g.over {
		return
	}
	if err != nil {
		if t.try < p.retries {
			p.dispatch(c, &task{g: g, i: t.i, part: t.part, try: t.try + 1, then: t.then})
			return
		}
		g.over = true
		if p.stateful {
			g.done(nil, fmt.Errorf("%s: %w within %v (cluster.request_timeout): %w", p.name, ErrNoAnswer, p.timeout, err))
			return
		}
		cause, reason, waited := ErrTimeout, messages.SkipReason_TIMEOUT, p.waits(t)
		if errors.Is(err, actor.ErrDeadLetter) {
			cause, reason, waited = ErrActorFailed, messages.SkipReason_ACTOR_FAILED, 0
		}
		g.done(nil, &SkipError{Stage: p.stage, Reason: reason, Waited: waited,
			Err: fmt.Errorf("%s: part %d failed %d times: %w: %w", p.name, t.i, t.try+1, cause, err)})
		return
	}
	if n, ok := res.(*messages.SkipNotice); ok {
		g.over = true
		g.done(nil, fromNotice(n))
		return
	}
	if g.forward && len(t.then) > 0 && t.via == nil { // one stage of two done: the answer goes on
		p.forward(c, t, res)
		return
	}
	g.replies[t.i] = res
	g.left--
	if g.left == 0 {
		g.over = true
		g.done(g.replies, nil)
	}
}

// release takes t, answered or lost, off its members.
func (p *pool) release(t *task) {
	delete(p.running, t)
	p.unbusy(t)
}

// unbusy takes one part off the members t went to.
func (p *pool) unbusy(t *task) {
	for _, v := range append([]*member{t.on}, t.via...) {
		v.busy--
	}
}

// forward hands res, t's answer, to t.then as the part's next stage (one
// that is not a step message ends the part's step as ErrShape).
func (p *pool) forward(c actor.Context, t *task, res any) {
	if _, ok := res.(messages.Header); !ok {
		t.g.over = true
		t.g.done(nil, skip(p.stage, fmt.Errorf("%s: part %d answered %T: %w", p.name, t.i, res, messages.ErrShape)))
		return
	}
	defer t.then[0].measure()
	t.then[0].dispatch(c, &task{g: t.g, i: t.i, part: res, then: t.then[1:]})
}

// add puts m in the pool and hands it the parts that were waiting.
func (p *pool) add(c actor.Context, m *member) {
	defer p.measure()
	p.members = append(p.members, m)
	if len(p.members) < p.need {
		return
	}
	p.need = 0
	waiting := p.waiting
	p.waiting = nil
	for _, t := range waiting {
		if t.g.over {
			endWait(t, "dropped: its step was over")
			continue
		}
		p.dispatch(c, t)
	}
}

// remove takes the member with pid out of the pool (leave) and sends its
// parts in flight again (reissue). It reports whether pid was a member.
func (p *pool) remove(c actor.Context, pid *actor.PID) (*member, bool) {
	m, ok := p.leave(pid)
	p.reissue(c, pid)
	return m, ok
}

// leave takes the member with pid out of the pool, if it is one. An actor
// that leaves several pools (a node's) leaves them all before any of its
// parts is reissued, so that none is relayed to it again.
func (p *pool) leave(pid *actor.PID) (*member, bool) {
	defer p.measure()
	i := slices.IndexFunc(p.members, func(m *member) bool { return m.pid.Equal(pid) })
	if i < 0 {
		return nil, false
	}
	m := p.members[i]
	p.members = slices.Delete(p.members, i, i+1)
	return m, true
}

// reissue sends the parts in flight on pid, or relayed to it from this
// pool, again: to the rest of the pool, or to wait for a member.
func (p *pool) reissue(c actor.Context, pid *actor.PID) {
	defer p.measure()
	for t := range p.late {
		if t.went(pid) {
			p.lateAnswer(t)
		}
	}
	for t := range p.running {
		if !t.went(pid) {
			continue
		}
		p.release(t)
		if p.settleHedge(t, fmt.Errorf("%s lost", pid.GetId())) {
			continue
		}
		endTask(t, "reissued: its actor was lost", fmt.Errorf("%s lost", pid.GetId()))
		if !t.g.over {
			p.reissued++
			p.dispatch(c, &task{g: t.g, i: t.i, part: t.part, try: t.try, then: t.then})
		}
	}
}

// went reports whether try t went to the actor pid, or is relayed to it.
func (t *task) went(pid *actor.PID) bool {
	return t.on.pid.Equal(pid) || slices.ContainsFunc(t.via, func(v *member) bool { return v.pid.Equal(pid) })
}

// index is m's place in the pool (-1: not a member).
func (p *pool) index(m *member) int { return slices.Index(p.members, m) }

// replace puts next in the place of the member at pid (a local member
// restarted under a new name); its parts in flight are sent again.
func (p *pool) replace(c actor.Context, pid *actor.PID, next *member) {
	if _, ok := p.remove(c, pid); ok {
		p.add(c, next)
	}
}

// measure records the pool's queue depth: parts waiting for a member and
// parts in flight.
func (p *pool) measure() {
	p.meter.Queue(p.name, len(p.waiting), len(p.running))
}
