package actors

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// PipelineOptions size and time the actor pipeline.
type PipelineOptions struct {
	// Generators and RewardEvaluators are the pool sizes (at least 1).
	Generators, RewardEvaluators int
	// RequestTimeout bounds one request to one stage actor.
	RequestTimeout time.Duration
	// Retries is how many more times a timed-out request is sent, each
	// time to the next actor of the pool.
	Retries int
	// ChunkWeights sends weights to generators as PolicyWeights chunks of
	// ChunkBytes, as across a network, instead of in-memory snapshots.
	ChunkWeights bool
	ChunkBytes   int
	// Wrap, if set, wraps each generator's sampler (fault injection in tests).
	Wrap func(id string, s Sampler) Sampler
}

// pipelineOptionsOf reads the options from the configuration.
func pipelineOptionsOf(d *Deps) PipelineOptions {
	return PipelineOptions{Generators: max(d.Cfg.Cluster.Generators, 1), RewardEvaluators: 1,
		RequestTimeout: d.Cfg.Cluster.RequestTimeout, Retries: 2, ChunkBytes: d.Cfg.Cluster.WeightChunkBytes}
}

// stageRequest asks the coordinator to spread parts over one stage's pool
// and answer with a stageReply.
type stageRequest struct {
	stage messages.Stage
	parts []any
}

// stageReply carries the replies in part order, or the stage's error.
type stageReply struct {
	replies []any
	err     error
}

// publishRequest asks the coordinator to hand new weights to every
// generator; the reply is a stageReply.
type publishRequest struct {
	policy *gpu.Model
}

// coordinator is the parent and supervisor of the stage actors: it spawns
// them, restarts a panicking one and re-sends its work (resendStrategy),
// spreads each stage's parts over its pool with a timeout and bounded
// retries (pool.scatter), and hands weights to the generators.
type coordinator struct {
	deps     *Deps
	models   Models
	ctrl     rewards.ControllerState
	opt      PipelineOptions
	pools    map[messages.Stage]*pool
	latest   *gpu.Model // the newest weights published to the generators (nil: none yet)
	stopping bool       // the run is ending: stopped children stay stopped
}

// Receive implements actor.Actor.
func (a *coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.spawn(c)
	case *actor.Stopping:
		a.stopping = true
	case *actor.Terminated:
		a.replace(c, m.Who)
	case *stageRequest:
		sender := c.Sender()
		a.pools[m.stage].scatter(c, m.parts, func(replies []any, err error) {
			c.Send(sender, &stageReply{replies: replies, err: err})
		})
	case *publishRequest:
		c.Respond(&stageReply{err: a.publish(c, m.policy)})
	}
}

// spawn starts the stage actors as children.
func (a *coordinator) spawn(c actor.Context) {
	d, o := a.deps, a.opt
	newPool := func(stage messages.Stage, name string, n int, props func(id string) *actor.Props) {
		p := &pool{name: name, stage: stage, timeout: o.RequestTimeout, retries: o.Retries}
		if stage == messages.Stage_LEARN || stage == messages.Stage_CONTROL {
			// Stateful: a request that timed out is still in the mailbox and
			// will run, so a retry would apply the batch twice. No retry, and
			// a timeout ends the run instead of skipping the step.
			p.retries, p.stateful = 0, true
		}
		for i := range n {
			id := fmt.Sprintf("%s-%d", name, i)
			pr := props(id)
			pid, err := c.SpawnNamed(pr, id)
			if err != nil {
				panic(fmt.Sprintf("actors: spawn %s: %v", id, err)) // names are unique per coordinator
			}
			p.pids, p.props = append(p.pids, pid), append(p.props, pr)
		}
		a.pools[stage] = p
	}
	a.pools = map[messages.Stage]*pool{}
	newPool(messages.Stage_GENERATE, "generator", max(o.Generators, 1), func(id string) *actor.Props {
		var s Sampler = a.models.Policy
		if o.Wrap != nil {
			s = o.Wrap(id, s)
		}
		return newGeneratorProps(id, d, newPolicySlot(s))
	})
	newPool(messages.Stage_REWARD, "reward", max(o.RewardEvaluators, 1), func(id string) *actor.Props {
		return newRewardProps(id, rewardSettingsOf(d))
	})
	newPool(messages.Stage_REFERENCE, "reference", 1, func(id string) *actor.Props {
		return newReferenceProps(id, a.models.Reference, referenceSettingsOf(d))
	})
	newPool(messages.Stage_LEARN, "learner", 1, func(string) *actor.Props {
		return newLearnerProps(a.models.Learner, learnSettingsOf(d))
	})
	ctrl := &controllerActor{settings: controlSettingsOf(d), state: a.ctrl} // the state's one owner from here on
	newPool(messages.Stage_CONTROL, "controller", 1, func(string) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return ctrl }) // one instance: state survives a restart
	})
}

// replace starts a fresh actor in the place of a stage actor that its
// supervisor stopped after repeated failures (resendStrategy), so the pool
// keeps its size for the rest of the run; a new generator is sent the
// newest weights. Requests lost with the old actor time out and are
// retried on the new one (pool.send).
func (a *coordinator) replace(c actor.Context, who *actor.PID) {
	if a.stopping {
		return
	}
	for _, p := range a.pools {
		i := slices.IndexFunc(p.pids, who.Equal)
		if i < 0 {
			continue
		}
		p.replaced++
		id := fmt.Sprintf("%s-%d.%d", p.name, i, p.replaced)
		pid, err := c.SpawnNamed(p.props[i], id)
		if err != nil {
			c.Logger().Error("stage actor stopped and could not be replaced", "actor", who.Id, "err", err)
			return
		}
		p.pids[i] = pid
		if p.stage == messages.Stage_GENERATE && a.latest != nil { // weights sent while it was down are lost
			c.Send(pid, &policySnapshot{model: a.latest})
		}
		c.Logger().Warn("stage actor stopped after repeated failures: replaced", "actor", who.Id, "by", id)
		return
	}
}

// publish sends the new weights to every generator, as one in-memory
// snapshot or as chunks. Both are sent by this actor before any later
// PromptBatch, so a generator always samples a batch with the weights
// published before it was asked.
func (a *coordinator) publish(c actor.Context, policy *gpu.Model) error {
	a.latest = policy
	var chunks []*messages.PolicyWeights
	if a.opt.ChunkWeights {
		var err error
		meta := messages.NewMeta(a.deps.RunID, policy.Version(), fmt.Sprintf("weights/%d", policy.Version()), policy.Version())
		if chunks, err = chunkModel(meta, policy, max(a.opt.ChunkBytes, 4)); err != nil {
			return err
		}
	}
	for _, pid := range a.pools[messages.Stage_GENERATE].pids {
		if chunks == nil {
			c.Send(pid, &policySnapshot{model: policy})
			continue
		}
		for _, w := range chunks {
			c.Send(pid, w)
		}
	}
	return nil
}

// actorStages runs each stage by asking the coordinator, which spreads
// the parts over the stage's actors. It is safe for concurrent use (the
// asynchronous runner produces and consumes at once).
type actorStages struct {
	sys     *actor.ActorSystem
	coord   *actor.PID
	timeout time.Duration // of one whole stage, retries included
}

// ask sends one stage request and waits for its reply.
func (s *actorStages) ask(ctx context.Context, msg any) (*stageReply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := s.sys.Root.RequestFuture(s.coord, msg, s.timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w: %w", ErrTimeout, err)
	}
	r, ok := res.(*stageReply)
	if !ok {
		return nil, fmt.Errorf("coordinator answered %T", res)
	}
	return r, r.err
}

// scatter asks for stage's parts to be done and returns the replies in
// part order, each of type Out.
func scatter[In, Out any](ctx context.Context, s *actorStages, stage messages.Stage, parts []In) ([]Out, error) {
	r, err := s.ask(ctx, &stageRequest{stage: stage, parts: anys(parts)})
	if err != nil {
		return nil, err
	}
	return replies[Out](r)
}

func (s *actorStages) generate(ctx context.Context, parts []*messages.PromptBatch) ([]*messages.Rollouts, error) {
	return scatter[*messages.PromptBatch, *messages.Rollouts](ctx, s, messages.Stage_GENERATE, parts)
}

func (s *actorStages) score(ctx context.Context, parts []*messages.Rollouts) ([]*messages.Scored, error) {
	return scatter[*messages.Rollouts, *messages.Scored](ctx, s, messages.Stage_REWARD, parts)
}

func (s *actorStages) reference(ctx context.Context, parts []*messages.Scored) ([]*messages.RefScored, error) {
	return scatter[*messages.Scored, *messages.RefScored](ctx, s, messages.Stage_REFERENCE, parts)
}

func (s *actorStages) learn(ctx context.Context, pb *messages.PreparedBatch) (*messages.StepReport, *gpu.Model, error) {
	lr, err := first(scatter[*messages.PreparedBatch, *learnerReply](ctx, s, messages.Stage_LEARN, []*messages.PreparedBatch{pb}))
	if err != nil {
		return nil, nil, err
	}
	return lr.report, lr.policy, nil
}

func (s *actorStages) control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	return first(scatter[*messages.StepStats, *messages.ControllerUpdate](ctx, s, messages.Stage_CONTROL, []*messages.StepStats{st}))
}

func (s *actorStages) publish(ctx context.Context, policy *gpu.Model) error {
	_, err := s.ask(ctx, &publishRequest{policy: policy})
	return err
}

func (s *actorStages) checkpoint(ctx context.Context, dir string) error {
	req := &messages.CheckpointRequest{Meta: messages.NewMeta("", 0, "checkpoint", 0), Dir: dir}
	done, err := first(scatter[*messages.CheckpointRequest, *messages.CheckpointDone](ctx, s, messages.Stage_LEARN, []*messages.CheckpointRequest{req}))
	if err != nil {
		return err
	}
	if done.GetError() != "" {
		return fmt.Errorf("learner: %s", done.GetError())
	}
	return nil
}

// replies type-checks a stage's replies.
func replies[T any](r *stageReply) ([]T, error) {
	out := make([]T, len(r.replies))
	for i, x := range r.replies {
		v, ok := x.(T)
		if !ok {
			return nil, fmt.Errorf("part %d: reply %T, want %T: %w", i, x, out[i], messages.ErrShape)
		}
		out[i] = v
	}
	return out, nil
}

func anys[T any](x []T) []any {
	out := make([]any, len(x))
	for i, v := range x {
		out[i] = v
	}
	return out
}

// Pipeline is a running actor system with a coordinator and its stage
// actors, and the Trainer that drives them.
type Pipeline struct {
	Trainer *Trainer
	sys     *actor.ActorSystem
}

// StartPipeline starts the actors of one run on a new actor system (its
// own log lines to logw at WARN, nil discards them) and returns the
// pipeline; Step(ctx, p.Trainer, n) then runs a step through the actors.
func StartPipeline(d *Deps, m Models, cs rewards.ControllerState, opt PipelineOptions, logw io.Writer) *Pipeline {
	if opt.RequestTimeout <= 0 {
		opt.RequestTimeout = 30 * time.Second
	}
	opt.Generators, opt.RewardEvaluators = max(opt.Generators, 1), max(opt.RewardEvaluators, 1)
	sys := NewSystem(logw)
	props := actor.PropsFromProducer(func() actor.Actor { return &coordinator{deps: d, models: m, ctrl: cs, opt: opt} },
		actor.WithSupervisor(newResendStrategy(5, time.Minute, 50*time.Millisecond)))
	coord, err := sys.Root.SpawnNamed(props, "coordinator")
	if err != nil {
		panic(fmt.Sprintf("actors: spawn coordinator: %v", err)) // a fresh system has no such name
	}
	// Retries of every part plus the resend backoffs fit in one stage timeout.
	timeout := time.Duration(opt.Retries+2)*opt.RequestTimeout + 10*time.Second
	st := &actorStages{sys: sys, coord: coord, timeout: timeout}
	return &Pipeline{sys: sys, Trainer: newTrainer(d, st, m, cs)}
}

// Stop stops every actor and the system.
func (p *Pipeline) Stop() { p.sys.Shutdown() }
