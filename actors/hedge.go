package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Hedging (cluster.hedge): a part still running on one node well after
// the fastest node answers its parts (a node that is slower, paused by
// its garbage collector or frozen, before the keepalive gives up on it)
// is sent as well to an idle member on another node, and the first answer
// counts; the other try is dropped and its answer, if any, ignored. Which
// node does a part never changes its result (each prompt carries its own
// seed), so a hedged run stays bit-identical. A part is hedged once, only
// to a member with nothing to do, and only where the pool's members span
// two nodes or more: one process never hedges.
const (
	// hedgeFactor: a try is hedged once it has run this many times the
	// fastest node's average answer.
	hedgeFactor = 3
	// hedgeMin is the shortest a try runs before it is hedged, and the
	// shortest wait between two looks at it.
	hedgeMin = 50 * time.Millisecond
	// tookWeight is the weight of a node's newest answer in its average.
	tookWeight = 0.25
)

// watch has the pool look for parts due for a hedge (check) when the
// first running part may be due, unless a look is already scheduled: one
// timer a pool, not one a part.
func (p *pool) watch(c actor.Context) {
	if !p.hedge || p.stateful || p.looking || !p.spansNodes() {
		return
	}
	var next time.Duration
	for t := range p.running {
		if t.hedged || t.g.over {
			continue
		}
		if wait, _ := p.due(t); next == 0 || wait < next {
			next = wait
		}
	}
	if next == 0 {
		return // nothing that may be hedged runs
	}
	p.looking = true
	f := actor.NewFuture(c.ActorSystem(), next)
	c.ReenterAfter(f, func(any, error) {
		p.looking = false
		p.check(c)
		p.watch(c)
	})
}

// due reports whether t has run long enough to be hedged, and if not, how
// long until it may have: hedgeFactor times the fastest node's average,
// at least hedgeMin; with no answer timed yet, never, and the next look
// after as long again as t has run. A part due with no member free is
// looked at again after a quarter of its time.
func (p *pool) due(t *task) (time.Duration, bool) {
	ran := time.Since(t.sent)
	var fastest time.Duration
	for _, d := range p.took {
		if fastest == 0 || d < fastest {
			fastest = d
		}
	}
	if fastest == 0 {
		return max(hedgeMin, ran), false
	}
	if limit := max(hedgeMin, hedgeFactor*fastest); ran < limit {
		return limit - ran, false
	}
	return max(hedgeMin, ran/4), true
}

// check hedges each running part that is due, oldest first, while a
// member of another node has nothing to do.
func (p *pool) check(c actor.Context) {
	var due []*task
	for t := range p.running {
		if _, ok := p.due(t); ok && !t.hedged && !t.g.over {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *task) int { return a.sent.Compare(b.sent) })
	for _, t := range due {
		if m := p.idleElsewhere(t); m != nil {
			p.hedgeOn(c, t, m)
		}
	}
}

// hedgeOn sends t's part to m as well.
func (p *pool) hedgeOn(c actor.Context, t *task, m *member) {
	defer p.measure()
	h := &task{g: t.g, i: t.i, part: t.part, try: t.try, then: t.then, hedged: true, sibling: t}
	t.hedged, t.sibling = true, h
	p.hedged++
	if t.span != nil {
		t.span.AddEvent(fmt.Sprintf("hedged on %s after %v", nodeName(m), time.Since(t.sent).Round(time.Millisecond)))
	}
	p.send(c, h, m)
}

// idleElsewhere returns a member with nothing to do on another node than
// t's, the one whose node answers fastest; nil when there is none.
func (p *pool) idleElsewhere(t *task) *member {
	var best *member
	for _, m := range p.members {
		if m.busy > 0 || m.node == t.on.node {
			continue
		}
		if best == nil || p.took[m.node] < p.took[best.node] {
			best = m
		}
	}
	return best
}

// spansNodes reports whether the pool's members are on two nodes or more
// (this process counting as one).
func (p *pool) spansNodes() bool {
	for _, m := range p.members {
		if m.node != p.members[0].node {
			return true
		}
	}
	return false
}

// timeAnswer adds the time t took to the average of its member's node.
func (p *pool) timeAnswer(t *task) {
	if !p.hedge {
		return
	}
	d := time.Since(t.sent)
	if p.took == nil {
		p.took = map[string]time.Duration{}
	}
	if old, ok := p.took[t.on.node]; ok {
		d = old + time.Duration(tookWeight*float64(d-old))
	}
	p.took[t.on.node] = d
}

// settleHedge settles try t of a hedged part, answered (err nil) or
// failed or lost (err): a failed one whose sibling still runs is dropped,
// and settleHedge reports true (the sibling counts: nothing more to do);
// an answered one supersedes its sibling, whose answer will be ignored.
func (p *pool) settleHedge(t *task, err error) bool {
	sib := t.sibling
	if sib == nil {
		return false
	}
	t.sibling, sib.sibling = nil, nil
	if !p.running[sib] {
		return false
	}
	if err != nil {
		endTask(t, "dropped: the part's other try runs on", err)
		return true
	}
	p.supersede(sib)
	endTask(sib, "dropped: the part's other try answered first", nil)
	return false
}

// supersede drops try t, whose hedge answered first: it no longer counts,
// but its members stay busy with it, and its member is not sent parts
// while others are free, until it answers or is lost (lateAnswer).
func (p *pool) supersede(t *task) {
	delete(p.running, t)
	if p.late == nil {
		p.late = map[*task]bool{}
	}
	p.late[t] = true
	t.on.late++
}

// lateAnswer frees the members of a superseded try t once it answers,
// times out or is lost (a no-op for any other try).
func (p *pool) lateAnswer(t *task) {
	if !p.late[t] {
		return
	}
	delete(p.late, t)
	t.on.late--
	p.unbusy(t)
}
