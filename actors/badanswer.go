package actors

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/messages"
)

// Malformed answers. Each answer of a generator, reward evaluator or
// reference scorer is checked when it reaches the pool, against the part
// it answers (checkAnswer). A stage actor that works never fails the check
// (what it cannot do it skips, with a SkipNotice): an answer that does
// comes from a buggy or hostile node, or from failing hardware. Such an
// answer is a failed try, redone on another member (of another node, where
// there is one) while the part has tries left, and counted against the
// node that made the data; a worker node with maxBadAnswers of them is
// dropped, and counted afresh if it joins again. This process's own
// actors are never dropped: their malformed answer skips the step, as any
// of their failures does.
const (
	// maxBadAnswers is how many malformed answers drop a worker node.
	maxBadAnswers = 3
	// badAnswerEvery is the least time between two lines about one node's
	// malformed answers.
	badAnswerEvery = time.Minute
)

// answerCheck is what the coordinator's pools share about malformed
// answers: the count per worker node, when each was last reported, and
// how to drop a node.
type answerCheck struct {
	members *membership                             // the nodes' addresses, and where lines go
	drop    func(c actor.Context, node, why string) // coordinator.dropNode
	bad     map[string]int                          // malformed answers of each node since it registered
	noticed map[string]time.Time                    // when each node's last one was reported
	total   int                                     // malformed answers of any member, this process's included
}

// newAnswerCheck returns an answerCheck that reports through members and
// drops nodes with drop.
func newAnswerCheck(members *membership, drop func(c actor.Context, node, why string)) *answerCheck {
	return &answerCheck{members: members, drop: drop, bad: map[string]int{}, noticed: map[string]time.Time{}}
}

// forget starts node's count afresh (it was dropped).
func (v *answerCheck) forget(node string) {
	delete(v.bad, node)
	delete(v.noticed, node)
}

// vetAnswers has the coordinator's generator, reward and reference pools
// check every answer.
func (a *coordinator) vetAnswers() {
	a.answers = newAnswerCheck(a.members, a.dropNode)
	for _, s := range []messages.Stage{messages.Stage_GENERATE, messages.Stage_REWARD, messages.Stage_REFERENCE} {
		a.pools[s].vet = a.answers
	}
}

// badAnswer is an answer that failed its check.
type badAnswer struct {
	on   *member // the member that made the bad data
	what string  // what the answer was: "a malformed Rollouts", "a string where ... was due"
	err  error   // what is malformed; nil for an answer of the wrong type
}

// Error is b for a user: "a malformed Rollouts (rollout 5 has 12 tokens
// and 11 log-probs)". A bad answer is the error of its try.
func (b *badAnswer) Error() string {
	if b.err == nil {
		return b.what
	}
	return fmt.Sprintf("%s (%s)", b.what, detail(b.err))
}

// detail is err's text without the messages sentinel it starts with.
func detail(err error) string {
	s := err.Error()
	for _, e := range []error{messages.ErrShape, messages.ErrNonFinite, messages.ErrMismatch} {
		s = strings.TrimPrefix(s, e.Error()+": ")
	}
	return s
}

// checkAnswer checks res, the answer to try t, against t's part; nil when
// it passes or is not an answer checked (a SkipNotice is a stage's own
// skip, not a bad answer).
//
// Attribution: a relayed part's answer comes from the last actor on its
// chain, but each stage's data comes from its own member, so the fault goes
// to the member that made the data that is bad, as far as the answer
// tells: the rollouts (their shape, prompts, log-probs) to the generator,
// or to the reward evaluator that handed on other rollouts than it was
// sent; the rewards to the reward evaluator; the reference log-probs, and
// a Scored other than the one sent, to the reference scorer. An answer of
// the wrong type goes to the last member on the chain, whose answer it
// should be. A member that alters what it hands on can make an earlier
// one look at fault; nothing in an answer tells the two apart.
func checkAnswer(t *task, res any) *badAnswer {
	if _, ok := res.(*messages.SkipNotice); ok {
		return nil
	}
	switch part := t.part.(type) {
	case *messages.PromptBatch:
		return checkGenerated(t, part, res)
	case *messages.Rollouts:
		return checkScored(t, part, res)
	case *messages.Scored:
		return checkReferenced(t, part, res)
	}
	return nil
}

// checkGenerated checks a generator's answer to pb: its Rollouts, or, for
// a part relayed on, the RefScored at the end of the chain.
func checkGenerated(t *task, pb *messages.PromptBatch, res any) *badAnswer {
	switch a := res.(type) {
	case *messages.Rollouts:
		return t.blame(0, a, messages.CheckGenerated(pb, a))
	case *messages.RefScored:
		if t.via != nil {
			if b := t.blame(0, a, messages.CheckGenerated(pb, a.GetScored().GetRollouts())); b != nil {
				return b
			}
			return checkChain(t, 1, a)
		}
	}
	return t.wrongType(res, "Rollouts")
}

// checkScored checks a reward evaluator's answer to ro: its Scored, or,
// for a part relayed on, the reference scorer's RefScored.
func checkScored(t *task, ro *messages.Rollouts, res any) *badAnswer {
	switch a := res.(type) {
	case *messages.Scored:
		if t.via == nil {
			if b := t.blame(0, a, messages.SameRollouts(a.GetRollouts(), ro)); b != nil {
				return b
			}
			return t.blame(0, a, messages.CheckRewards(a))
		}
	case *messages.RefScored:
		if t.via != nil {
			if b := t.blame(0, a, messages.SameRollouts(a.GetScored().GetRollouts(), ro)); b != nil {
				return b
			}
			return checkChain(t, 0, a)
		}
	}
	return t.wrongType(res, "Scored")
}

// checkReferenced checks a reference scorer's answer to sc.
func checkReferenced(t *task, sc *messages.Scored, res any) *badAnswer {
	a, ok := res.(*messages.RefScored)
	if !ok {
		return t.wrongType(res, "RefScored")
	}
	if b := t.blame(0, a, messages.SameScored(a.GetScored(), sc)); b != nil {
		return b
	}
	return t.blame(0, a, messages.CheckRefLogps(a))
}

// checkChain checks the rewards and reference log-probs of rs, relayed
// through the reward evaluator at place k of t's chain and the reference
// scorer after it.
func checkChain(t *task, k int, rs *messages.RefScored) *badAnswer {
	if b := t.blame(k, rs, messages.CheckRewards(rs.GetScored())); b != nil {
		return b
	}
	return t.blame(k+1, rs, messages.CheckRefLogps(rs))
}

// chain is the members try t went through, in order: its member, then
// those it was relayed through.
func (t *task) chain() []*member { return append([]*member{t.on}, t.via...) }

// blame is err (nil: none) as a malformed answer res, at fault the member
// at place k of t's chain (the last one where the chain is shorter).
func (t *task) blame(k int, res proto.Message, err error) *badAnswer {
	if err == nil {
		return nil
	}
	chain := t.chain()
	return &badAnswer{on: chain[min(k, len(chain)-1)], what: "a malformed " + typeName(res), err: err}
}

// wrongType is res as an answer of the wrong type, where want was due,
// at fault the last member of t's chain.
func (t *task) wrongType(res any, want string) *badAnswer {
	chain := t.chain()
	return &badAnswer{on: chain[len(chain)-1], what: fmt.Sprintf("a %s where a %s was due", typeName(res), want)}
}

// typeName names res's type for a user: a message's own name.
func typeName(res any) string {
	if m, ok := res.(proto.Message); ok && m != nil {
		return string(m.ProtoReflect().Descriptor().Name())
	}
	return fmt.Sprintf("%T", res)
}

// vetAnswer checks res, the answer of try t (err: its failure, not
// checked), and handles a malformed one (badAnswer): it reports whether it
// did, leaving nothing more to do with the answer.
func (p *pool) vetAnswer(c actor.Context, t *task, res any, err error) bool {
	if p.vet == nil || err != nil {
		return false
	}
	b := checkAnswer(t, res)
	if b == nil {
		return false
	}
	p.badAnswer(c, t, b)
	return true
}

// badAnswer handles b, try t's malformed answer: a hedged part's other try
// runs on; a part with tries left is redone on another member; one
// without, or one whose bad data this process made, ends its step as a
// SHAPE_MISMATCH skip. A worker node is blamed for it.
func (p *pool) badAnswer(c actor.Context, t *task, b *badAnswer) {
	p.vet.total++
	if p.settleHedge(t, b) { // the try is dropped: its sibling counts
		p.vet.blame(c, t, b, "the part's other try runs on")
		return
	}
	g := t.g
	switch {
	case g.over:
		endTask(t, "", b)
		p.vet.blame(c, t, b, "its step was over")
	case t.try < p.retries && b.on.node != "":
		endTask(t, "malformed answer: redone on another member", b)
		p.vet.blame(c, t, b, "the part is redone elsewhere")
		p.redo(c, t, b.on.node)
	default:
		endTask(t, "", b)
		p.vet.blame(c, t, b, "the step is skipped")
		g.over = true
		g.done(nil, &SkipError{Stage: p.stage, Reason: messages.SkipReason_SHAPE_MISMATCH,
			Err: fmt.Errorf("%s: part %d, try %d of %d: %s made %v: %w", p.name, t.i, t.try+1, p.retries+1, b.on.pid.GetId(), b, messages.ErrShape)})
	}
}

// blame counts b against the worker node that made it (none for this
// process's actors), with one line, at most one a badAnswerEvery a node,
// saying what became of the part (then); the node's maxBadAnswers-th drops
// it.
func (v *answerCheck) blame(c actor.Context, t *task, b *badAnswer, then string) {
	id := b.on.node
	if id == "" {
		return
	}
	v.bad[id]++
	if last, ok := v.noticed[id]; !ok || time.Since(last) >= badAnswerEvery {
		v.noticed[id] = time.Now()
		v.members.notice("node %s at %s answered part %d of step %d with %v; %s", id, v.members.address(id), t.i, stepOf(t.part)+1, b, then)
	}
	if n := v.bad[id]; n >= maxBadAnswers {
		v.forget(id)
		v.drop(c, id, fmt.Sprintf("%d malformed answers, the last: %v", n, b))
	}
}

// stepOf is the step in part's header (0 without one).
func stepOf(part any) int64 {
	if h, ok := part.(messages.Header); ok {
		return h.GetMeta().GetStep()
	}
	return 0
}

// address is where node id is, "?" when it is not registered.
func (m *membership) address(id string) string {
	if n, ok := m.nodes[id]; ok {
		return n.address
	}
	return "?"
}

// redo sends part t again, as its next try, kept off the members of node
// (in p, and in the pools the part goes on to) wherever another member can
// take it.
func (p *pool) redo(c actor.Context, t *task, node string) {
	p.dispatch(c, &task{g: t.g, i: t.i, part: t.part, try: t.try + 1, then: t.then, avoid: node})
}
