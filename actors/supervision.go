package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// supervisor starts a pipeline's local stage actors as the coordinator's
// children (this process's generators, reward evaluators and reference
// scorers, the learner and the controller), each with its stage's settings,
// and replaces one that its supervisor strategy (resendStrategy) stopped
// after repeated failures, so that a pool keeps its size for the whole
// run.
type supervisor struct {
	opt      PipelineOptions
	stages   stageSettings
	learn    learnSettings
	control  rewards.Controllers
	tel      telemetry
	device   gpu.Device
	models   Models
	state    rewards.ControllerState // the controller's first state
	replaced map[messages.Stage]int  // local members replaced so far, for fresh names
}

// spawn starts the local stage actors and returns the pools they make.
func (s *supervisor) spawn(c actor.Context) map[messages.Stage]*pool {
	o := s.opt
	pools := map[messages.Stage]*pool{}
	add := func(stage messages.Stage, name string, n int, props func(id string) *actor.Props) {
		pools[stage] = s.newPool(c, stage, name, n, props)
	}
	add(messages.Stage_GENERATE, "generator", o.Generators, func(id string) *actor.Props {
		var p Sampler = s.models.Policy
		if o.Wrap != nil {
			p = o.Wrap(id, p)
		}
		return newGeneratorProps(id, s.stages.generate, s.device, nil, s.tel, newPolicySlot(p))
	})
	pools[messages.Stage_GENERATE].need = o.MinGenerators
	add(messages.Stage_REWARD, "reward", o.RewardEvaluators, func(id string) *actor.Props {
		return newRewardProps(id, s.stages.reward, s.tel)
	})
	add(messages.Stage_REFERENCE, "reference", o.ReferenceScorers, func(id string) *actor.Props {
		return newReferenceProps(id, s.stages.reference, s.device, nil, s.tel, s.models.Reference)
	})
	add(messages.Stage_LEARN, "learner", 1, func(string) *actor.Props {
		return newLearnerProps(s.models.Learner, s.learn, s.tel)
	})
	ctrl := &controllerActor{settings: s.control, state: s.state, tel: s.tel} // the state's one owner from here on
	add(messages.Stage_CONTROL, "controller", 1, func(string) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return ctrl }) // one instance: state survives a restart
	})
	return pools
}

// newPool spawns n members of a stage named name-0, name-1, ...
func (s *supervisor) newPool(c actor.Context, stage messages.Stage, name string, n int, props func(id string) *actor.Props) *pool {
	p := &pool{name: name, stage: stage, timeout: s.opt.timeout(stage), retries: s.opt.Retries, hedge: s.opt.Hedge,
		tracer: s.tel.tracer, meter: s.tel.meter}
	if stage == messages.Stage_LEARN || stage == messages.Stage_CONTROL {
		// Stateful: a request that timed out is still in the mailbox and
		// will run, so a retry (or a hedge) would apply the batch twice.
		// No retry, and a timeout ends the run instead of skipping the step.
		p.retries, p.stateful, p.hedge = 0, true, false
	}
	for i := range n {
		id := fmt.Sprintf("%s-%d", name, i)
		pr := props(id)
		pid, err := c.SpawnNamed(pr, id)
		if err != nil {
			panic(fmt.Sprintf("actors: spawn %s: %v", id, err)) // names are unique per coordinator
		}
		p.members = append(p.members, &member{pid: pid, props: pr})
	}
	return p
}

// replace starts a fresh actor in the place of old, a local member of p
// that stopped, and returns it (nil when it cannot be started: old just
// leaves the pool). Its parts in flight are sent again.
func (s *supervisor) replace(c actor.Context, p *pool, old *member) *actor.PID {
	if s.replaced == nil {
		s.replaced = map[messages.Stage]int{}
	}
	s.replaced[p.stage]++
	id := fmt.Sprintf("%s-%d.%d", p.name, p.index(old), s.replaced[p.stage])
	pid, err := c.SpawnNamed(old.props, id)
	if err != nil {
		c.Logger().Error("stage actor stopped and could not be replaced", "actor", old.pid.Id, "err", err)
		p.remove(c, old.pid)
		return nil
	}
	p.replace(c, old.pid, &member{pid: pid, props: old.props})
	c.Logger().Warn("stage actor stopped after repeated failures: replaced", "actor", old.pid.Id, "by", id)
	return pid
}

// resendStrategy supervises the stage pools (generators, reward
// evaluators, the reference scorer): a child that panics is restarted after
// a backoff growing with its recent failures, and the message it failed on
// is sent to it again, so whoever requested the work still gets an answer
// (the envelope keeps the requester as sender). A child that fails more
// than maxRestarts times within window is stopped; requests to it then come
// back as dead letters and the coordinator retries or skips the batch.
type resendStrategy struct {
	maxRestarts int
	window      time.Duration
	backoff     time.Duration
}

var _ actor.SupervisorStrategy = (*resendStrategy)(nil)

// newResendStrategy returns the strategy with the given bounds.
func newResendStrategy(maxRestarts int, window, backoff time.Duration) *resendStrategy {
	return &resendStrategy{maxRestarts: maxRestarts, window: window, backoff: backoff}
}

// HandleFailure implements actor.SupervisorStrategy.
func (s *resendStrategy) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	if rs.NumberOfFailures(s.window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	if rs.NumberOfFailures(s.window) > s.maxRestarts {
		sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.StopDirective})
		sup.StopChildren(child)
		return
	}
	delay := time.Duration(rs.FailureCount()) * s.backoff
	time.AfterFunc(delay, func() {
		sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
		sup.RestartChildren(child)
		if _, system := message.(actor.SystemMessage); message != nil && !system {
			sys.Root.Send(child, message)
		}
	})
}
