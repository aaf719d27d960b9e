package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// actorStages runs each stage by asking the coordinator, which spreads
// the parts over the stage's actors. It is safe for concurrent use (the
// asynchronous runner produces and consumes at once).
type actorStages struct {
	sys   *actor.ActorSystem
	coord *actor.PID
}

// ask sends one request to the coordinator and waits for its reply or for
// ctx. There is no overall deadline: every request the coordinator sends
// has its own timeout, and parts wait, by design, while no actor serves
// their stage (worker nodes may come later).
func (s *actorStages) ask(ctx context.Context, msg any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := actor.NewFuture(s.sys, -1) // no timeout: see above
	s.sys.Root.RequestWithCustomSender(s.coord, msg, f.PID())
	return awaitFuture(ctx, f)
}

// awaitFuture returns f's result, or ctx's error as soon as ctx ends
// (the future's own wait goes on in the background, until its answer or
// its timeout).
func awaitFuture(ctx context.Context, f *actor.Future) (any, error) {
	done := make(chan struct{})
	var res any
	var err error
	go func() {
		res, err = f.Result()
		close(done)
	}()
	select {
	case <-done:
		return res, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// askStage asks for a stage reply.
func (s *actorStages) askStage(ctx context.Context, msg any) (*stageReply, error) {
	res, err := s.ask(ctx, msg)
	if err != nil {
		return nil, err
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
	r, err := s.askStage(ctx, &stageRequest{stage: stage, parts: anys(parts)})
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

// scoreReference sends each part to a reward evaluator whose Scored goes
// on to a reference scorer: relayed by the evaluator to one beside it, or
// by the coordinator (pool.scatterThen).
func (s *actorStages) scoreReference(ctx context.Context, parts []*messages.Rollouts) ([]*messages.RefScored, error) {
	r, err := s.askStage(ctx, &stageRequest{stage: messages.Stage_REWARD, then: messages.Stage_REFERENCE, parts: anys(parts)})
	if err != nil {
		return nil, err
	}
	return replies[*messages.RefScored](r)
}

// generateReference sends each part to a generator whose Rollouts go on
// to a reward evaluator and its Scored to a reference scorer beside that
// (pool.relayTo): a part comes back as its RefScored, or as its Rollouts
// where it was not relayed or had a group left incomplete.
func (s *actorStages) generateReference(ctx context.Context, parts []*messages.PromptBatch) ([]chained, error) {
	r, err := s.askStage(ctx, &stageRequest{stage: messages.Stage_GENERATE,
		through: []messages.Stage{messages.Stage_REWARD, messages.Stage_REFERENCE}, parts: anys(parts)})
	if err != nil {
		return nil, err
	}
	out := make([]chained, len(r.replies))
	for i, x := range r.replies {
		switch v := x.(type) {
		case *messages.RefScored:
			out[i].ref = v
		case *messages.Rollouts:
			out[i].ro = v
		default:
			return nil, skip(messages.Stage_GENERATE, fmt.Errorf("part %d: reply %T, want a RefScored or Rollouts: %w", i, x, messages.ErrShape))
		}
	}
	return out, nil
}

func (s *actorStages) learn(ctx context.Context, pb *messages.PreparedBatch) (*learnerReply, error) {
	return first(scatter[*messages.PreparedBatch, *learnerReply](ctx, s, messages.Stage_LEARN, []*messages.PreparedBatch{pb}))
}

func (s *actorStages) control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	return first(scatter[*messages.StepStats, *messages.ControllerUpdate](ctx, s, messages.Stage_CONTROL, []*messages.StepStats{st}))
}

func (s *actorStages) publish(ctx context.Context, policy *gpu.Model) error {
	_, err := s.askStage(ctx, &publishRequest{policy: policy, ctx: ctx})
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

func (s *actorStages) stats(ctx context.Context) ClusterStats {
	res, err := s.ask(ctx, &statsRequest{})
	if st, ok := res.(*coordinatorStats); ok && err == nil {
		return ClusterStats{Reissued: st.reissued, Hedged: st.hedged, BadAnswers: st.bad, Sync: st.lastSync}
	}
	return ClusterStats{}
}

// parts asks the coordinator what its stage requests hold, waiting at most
// a second (zero if it is busier than that).
func (s *actorStages) parts(ctx context.Context) partsInFlight {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := s.ask(ctx, &partsRequest{})
	if p, ok := res.(partsInFlight); ok && err == nil {
		return p
	}
	return partsInFlight{}
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
