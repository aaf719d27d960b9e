package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Hedging (cluster.hedge): a part still running well after the fastest
// node answers its parts (a node that is slower, paused by its garbage
// collector or frozen, before the keepalive gives up on it) is sent as
// well to an idle member, and the first answer counts; the other try is
// dropped and its answer, if any, ignored. A try goes through a chain of
// nodes: its member's, and for a relayed part (a generator's prompts
// relayed to a reward evaluator and the reference scorer beside it) those
// of the members it is relayed through; any of them may be the slow one.
// The hedge goes through as few of those nodes as it can (none, where an
// idle member and a relay route allow), and never along the same nodes
// stage by stage: a frozen reward+reference node is hedged around as a
// frozen generator node is, even through the same generator node. Which
// node does a part never changes its result (each prompt carries its own
// seed), so a hedged run stays bit-identical. A part is hedged once, only
// to a member with nothing to do (or, where every member is on one node,
// to the one that holds it: free), and only where some chain avoids a
// node of its try at some stage: one process never hedges.
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
// first running part that some way could hedge (canHedge) may be due,
// unless a look is already scheduled: one timer a pool, not one a part.
func (p *pool) watch(c actor.Context) {
	if !p.hedge || p.stateful || p.looking {
		return
	}
	var next time.Duration
	for t := range p.running {
		if t.hedged || t.g.over || !p.spansNodes(t.then) || !p.canHedge(t) {
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

// check hedges each running part that is due, oldest first, while an
// idle member offers a chain that avoids a node of its try.
func (p *pool) check(c actor.Context) {
	var due []*task
	for t := range p.running {
		if _, ok := p.due(t); ok && !t.hedged && !t.g.over {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *task) int { return a.sent.Compare(b.sent) })
	for _, t := range due {
		if w, ok := p.hedgeWay(t, p.free(t)); ok {
			p.hedgeOn(c, t, w)
		}
	}
}

// hedgeOn sends t's part along w as well.
func (p *pool) hedgeOn(c actor.Context, t *task, w way) {
	defer p.measure()
	h := &task{g: t.g, i: t.i, part: t.part, try: t.try, then: t.then, hedged: true, sibling: t}
	t.hedged, t.sibling = true, h
	p.hedged++
	if t.span != nil {
		t.span.AddEvent(fmt.Sprintf("hedged on %s after %v", w, time.Since(t.sent).Round(time.Millisecond)))
	}
	p.send(c, h, w.m, w.via)
}

// spansNodes reports whether the members of p and of the later stages
// then are on two nodes or more (this process counting as one): where
// they are not (--role all), no way can avoid a node, and watch need not
// list them.
func (p *pool) spansNodes(then []*pool) bool {
	var first *member
	for _, q := range append([]*pool{p}, then...) {
		if q == nil { // a stage with no pool: nothing is relayed (routes)
			continue
		}
		for _, m := range q.members {
			if first == nil {
				first = m
			} else if m.node != first.node {
				return true
			}
		}
	}
	return false
}

// canHedge reports whether some way, busy or not, avoids a node of try t
// (way.avoids).
func (p *pool) canHedge(t *task) bool {
	_, ok := p.hedgeWay(t, func(*member) bool { return true })
	return ok
}

// free returns whether a member may take a hedge of t: one with nothing
// to do, or, where every member of the pool is on t's node (so no other
// node could take it), one that holds nothing but tries due for a hedge,
// t among them. A generator holds a part it relayed until the end of the
// chain answers, long after it handed it on: with one generator node, a
// part stuck on a frozen reward+reference node would otherwise never be
// hedged (and one stuck on the frozen generator node itself has nowhere
// else to go anyway).
func (p *pool) free(t *task) func(*member) bool {
	alone := !slices.ContainsFunc(p.members, func(m *member) bool { return m.node != t.on.node })
	return func(m *member) bool {
		return m.busy == 0 || (alone && m == t.on && p.holdsOnlyDue(m))
	}
}

// holdsOnlyDue reports whether every try m is busy with is due for a
// hedge, or superseded by its hedge (slow too).
func (p *pool) holdsOnlyDue(m *member) bool {
	slow := 0
	for t := range p.running {
		if t.on == m {
			if _, ok := p.due(t); !ok {
				return false
			}
			slow++
		}
	}
	for t := range p.late {
		if t.on == m {
			slow++
		}
	}
	return slow == m.busy
}

// hedgeWay picks the way to hedge try t along, from a member that takes
// accepts, among those that avoid a node of t's (avoids): the way through
// fewest of t's nodes, then the one whose member's node answers fastest,
// then the one through the least busy relay; false when there is none
// (one process, or no member free elsewhere).
func (p *pool) hedgeWay(t *task, takes func(*member) bool) (way, bool) {
	slow := wayOf(t).nodes()
	var best way
	fewest := 0
	for _, w := range p.ways(t, takes) {
		if !w.avoids(t) {
			continue
		}
		n := shared(w.nodes(), slow)
		if best.m == nil || n < fewest || (n == fewest && p.faster(w, best)) {
			best, fewest = w, n
		}
	}
	return best, best.m != nil
}

// ways lists every way a try of t could go from a member that takes
// accepts: through each route there is from it, or unrelayed where there
// is none.
func (p *pool) ways(t *task, takes func(*member) bool) []way {
	var ws []way
	for _, m := range p.members {
		if !takes(m) {
			continue
		}
		vias := routes(m, t.then)
		if len(vias) == 0 {
			vias = [][]*member{nil}
		}
		for _, via := range vias {
			ws = append(ws, way{m, via})
		}
	}
	return ws
}

// way is a chain of members a try of a part goes through: a member of
// the pool, then, for a relayed part, one member a later stage.
type way struct {
	m   *member
	via []*member
}

// wayOf is the way try t went.
func wayOf(t *task) way { return way{t.on, t.via} }

// nodes lists the nodes w goes through, each once.
func (w way) nodes() []string {
	ns := []string{w.m.node}
	for _, v := range w.via {
		if !slices.Contains(ns, v.node) {
			ns = append(ns, v.node)
		}
	}
	return ns
}

// avoids reports whether w leaves out, at some stage, the node try t went
// through there: a hedge along exactly t's nodes would wait as t does.
func (w way) avoids(t *task) bool {
	if w.m.node != t.on.node {
		return true
	}
	for i, v := range t.via {
		if i >= len(w.via) || w.via[i].node != v.node {
			return true
		}
	}
	return false
}

// String names w's nodes, in order.
func (w way) String() string {
	s := nodeName(w.m)
	for _, v := range w.via {
		s += "→" + nodeName(v)
	}
	return s
}

// shared counts the nodes of slow that nodes holds.
func shared(nodes, slow []string) int {
	n := 0
	for _, s := range slow {
		if slices.Contains(nodes, s) {
			n++
		}
	}
	return n
}

// faster reports whether way a is to be preferred to b, both through as
// many slow nodes: its member's node answers faster, or as fast and its
// first relay is less busy.
func (p *pool) faster(a, b way) bool {
	ta, tb := p.took[a.m.node], p.took[b.m.node]
	if ta != tb {
		return ta < tb
	}
	return a.via != nil && b.via != nil && a.via[0].busy < b.via[0].busy
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
	p.supersede(sib, t)
	endTask(sib, "dropped: the part's other try answered first", nil)
	return false
}

// supersede drops try t, whose sibling (won) answered first: t no longer
// counts, but its members stay busy with it until it answers or is lost
// (lateAnswer), and those on nodes won did not go through (the slow one
// is among them) are marked late: they are not sent parts while others
// are free.
func (p *pool) supersede(t, won *task) {
	delete(p.running, t)
	fast := wayOf(won).nodes()
	var slow []*member
	for _, m := range append([]*member{t.on}, t.via...) {
		if !slices.Contains(fast, m.node) {
			m.late++
			slow = append(slow, m)
		}
	}
	if p.late == nil {
		p.late = map[*task][]*member{}
	}
	p.late[t] = slow
}

// lateAnswer frees the members of a superseded try t once it answers,
// times out or is lost (a no-op for any other try).
func (p *pool) lateAnswer(t *task) {
	slow, ok := p.late[t]
	if !ok {
		return
	}
	delete(p.late, t)
	for _, m := range slow {
		m.late--
	}
	p.unbusy(t)
}
