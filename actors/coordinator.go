package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// coordinator is the one actor the trainer talks to. It holds each
// stage's pool (pool.go: parts spread with a timeout and bounded retries,
// the parts of a lost member sent again) and three parts, each with its
// own state and file:
//
//   - supervision (supervision.go): the local stage actors, spawned as its
//     children and replaced when their supervisor stops them;
//   - membership (membership.go): worker nodes that join, register their
//     stage actors, heartbeat and leave;
//   - publication (publish.go): the newest weights to every generator, and
//     the reference to every remote reference scorer.
//
// It does not care where a member lives: local or remote, it is a PID in
// a pool. The trainer reaches it through actorStages (actorstages.go).
type coordinator struct {
	pools      map[messages.Stage]*pool
	supervisor *supervisor
	members    *membership
	weights    *publisher
	answers    *answerCheck // malformed answers of the pools' members (badanswer.go)
	stopping   bool         // the run is ending: stopped children stay stopped
}

// stageRequest asks the coordinator to spread parts over one stage's pool
// and answer with a stageReply; with then set, each part's answer goes on
// to that stage, whose answers are the reply's (pool.scatterThen); with
// through set, each part is relayed through those stages where it can be
// (pool.relayTo).
type stageRequest struct {
	stage   messages.Stage
	then    messages.Stage
	through []messages.Stage
	parts   []any
}

// stageReply carries the replies in part order, or the stage's error.
type stageReply struct {
	replies []any
	err     error
}

// statsRequest asks for the coordinator's counters (a coordinatorStats).
type statsRequest struct{}

// coordinatorStats are the coordinator's counters.
type coordinatorStats struct {
	reissued int         // parts sent again because their actor was lost
	hedged   int         // parts sent to a second node because they ran long on the first
	bad      int         // malformed answers (badanswer.go)
	lastSync SyncMeasure // the newest weight publication every remote generator acknowledged
}

// Receive implements actor.Actor.
func (a *coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.pools = a.supervisor.spawn(c)
		a.vetAnswers()
		a.members.start(c)
	case *actor.Stopping:
		a.stopping = true
	case *actor.Terminated:
		a.terminated(c, m.Who)
	case *stageRequest:
		sender := c.Sender()
		reply := func(replies []any, err error) { c.Send(sender, &stageReply{replies: replies, err: err}) }
		if m.through != nil {
			a.pools[m.stage].relayTo(c, m.parts, a.poolsOf(m.through), reply)
			return
		}
		a.pools[m.stage].scatterThen(c, m.parts, a.pools[m.then], reply)
	case *publishRequest:
		c.Respond(&stageReply{}) // at once: see publisher.publish
		a.weights.publish(c, m, a.pools[messages.Stage_GENERATE].members)
	case *statsRequest:
		st := &coordinatorStats{lastSync: a.weights.lastSync, bad: a.answers.total}
		for _, s := range []messages.Stage{messages.Stage_GENERATE, messages.Stage_REWARD, messages.Stage_REFERENCE} {
			st.reissued += a.pools[s].reissued
			st.hedged += a.pools[s].hedged
		}
		c.Respond(st)
	case *partsRequest:
		c.Respond(a.partsInFlight())
	case *messages.JoinRequest:
		if reply := a.members.join(m, c.Sender(), a.weights.hasReference()); reply != nil {
			c.Respond(reply)
		}
	case *messages.Register:
		a.register(c, m)
	case *messages.Heartbeat:
		c.Respond(a.members.heartbeat(m))
	case tick:
		a.members.reportMissing(a.pools)
	}
}

// terminated handles a stopped member: a worker node's actor (its process
// died or hung) takes its whole node out of the pools; a local one that
// its supervisor stopped after repeated failures is replaced by a fresh
// one, which is sent the newest weights if it is a generator. Either way
// its parts in flight are sent again at once, and it acknowledges no
// weights any more.
func (a *coordinator) terminated(c actor.Context, who *actor.PID) {
	if a.stopping {
		return
	}
	p, old := a.memberOf(who)
	if old == nil {
		return
	}
	a.weights.left(who, "left the pool")
	if old.node != "" {
		a.dropNode(c, old.node, "its "+p.name+" actor "+who.GetId()+" stopped")
		return
	}
	pid := a.supervisor.replace(c, p, old)
	for _, q := range a.pools { // parts relayed to it from another stage go again too
		q.reissue(c, who)
	}
	if pid != nil && p.stage == messages.Stage_GENERATE {
		a.weights.sendLatest(c, pid) // weights sent while it was down are lost
	}
}

// poolsOf returns the pools of stages, in order.
func (a *coordinator) poolsOf(stages []messages.Stage) []*pool {
	out := make([]*pool, len(stages))
	for i, s := range stages {
		out[i] = a.pools[s]
	}
	return out
}

// memberOf finds the pool member with pid.
func (a *coordinator) memberOf(pid *actor.PID) (*pool, *member) {
	for _, p := range a.pools {
		for _, m := range p.members {
			if m.pid.Equal(pid) {
				return p, m
			}
		}
	}
	return nil, nil
}

// register admits a node's stage actors: each is watched (a watch does
// not survive a reconnect: every registration watches afresh), sent the
// weights it needs ahead of any work, and added to its pool. A node that
// registers again (it was dropped, then came back) replaces its old entry.
// The node is answered first: its answer would otherwise wait behind the
// weights on the connection (a GB for a model of SmolLM2-135M's shape and
// its reference), longer than the node waits for it.
func (a *coordinator) register(c actor.Context, m *messages.Register) {
	if a.members.opt == nil {
		return
	}
	if err := a.members.registrable(m, c.Sender()); err != nil {
		a.members.opt.refused("registration", m.GetNodeId(), m.GetAddress(), err.Error())
		return
	}
	if a.members.known(m.GetNodeId()) {
		a.dropNode(c, m.GetNodeId(), "it registered again")
	}
	n := &workerNode{id: m.GetNodeId(), address: m.GetAddress()}
	c.Respond(&messages.Registered{NodeId: n.id})
	var roles []string
	for _, sa := range m.GetActors() {
		p, ok := a.pools[sa.GetStage()]
		if !ok || p.stateful {
			continue
		}
		pid := actor.NewPID(m.GetAddress(), sa.GetId())
		c.Watch(pid)
		n.actors = append(n.actors, pid)
		a.weights.admit(c, pid, sa.GetStage())
		p.add(c, &member{pid: pid, node: n.id})
		roles = append(roles, p.name)
	}
	a.members.admitted(n, roles)
}

// dropNode forgets a worker node: every actor of it leaves its pool, then
// its parts in flight, and those relayed to it, go to the rest; its next
// Heartbeat learns that it must join again.
func (a *coordinator) dropNode(c actor.Context, id, why string) {
	pids := a.members.drop(id, why)
	a.answers.forget(id) // counted afresh if it joins again
	for _, pid := range pids {
		c.Unwatch(pid)
		a.weights.left(pid, "its node left")
		for _, p := range a.pools {
			p.leave(pid)
		}
	}
	for _, pid := range pids { // once none of them is a member: nothing is relayed to them again
		for _, p := range a.pools {
			p.reissue(c, pid)
		}
	}
}

// CoordinatorName is the coordinator's name in a learner node's actor
// system: worker nodes address it as actor.NewPID(learnerAddress,
// CoordinatorName).
const CoordinatorName = "coordinator"

// publishRequest asks the coordinator to hand new weights to every
// generator; the reply is a stageReply, sent as soon as the weights are
// on their way (a generator takes messages in order, so it uses them for
// any later work). The coordinator times their arrival (coordinatorStats).
type publishRequest struct {
	policy *gpu.Model
	ctx    context.Context // the step's trace, in this process
}
