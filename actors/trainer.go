package actors

import (
	"context"
	"sync/atomic"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// stages runs the stage functions of a step: directly in the caller's
// goroutine (localStages, Step's plain calls) or spread over the actors
// (actorStages, the pipeline). Both call the same plain functions.
type stages interface {
	generate(ctx context.Context, pb *messages.PromptBatch) (*messages.Rollouts, error)
	score(ctx context.Context, ro *messages.Rollouts) (*messages.Scored, error)
	reference(ctx context.Context, sc *messages.Scored) (*messages.RefScored, error)
	learn(ctx context.Context, pb *messages.PreparedBatch) (*messages.StepReport, *gpu.Model, error)
	control(ctx context.Context, st *messages.StepStats) (*messages.ControllerState, error)
	publish(ctx context.Context, policy *gpu.Model) error
}

// Trainer holds a run's state between steps: its stages, the controller
// state the next batch is weighted with and the policy version the
// generators sample from.
type Trainer struct {
	deps    *Deps
	stages  stages
	control rewards.ControllerState
	version atomic.Int64 // read by produce while consume publishes (asynchronous mode)
}

// Models are a run's models after the warm start: the learner (owning the
// trainable weights), the frozen reference and the policy the generators
// start from (a snapshot of the learner).
type Models struct {
	Learner   *gpu.Learner
	Reference Scorer
	Policy    Sampler
}

// NewTrainer returns a trainer whose stages are plain calls in the
// caller's goroutine (Step's reference driver), starting from controller
// state cs.
func NewTrainer(d *Deps, m Models, cs rewards.ControllerState) *Trainer {
	t := &Trainer{deps: d, control: cs, stages: &localStages{
		deps: d, policy: m.Policy, ref: m.Reference, learner: m.Learner, ctrl: cs,
	}}
	t.version.Store(m.Policy.Version())
	return t
}

// Control returns the controller state the next step's weights use.
func (t *Trainer) Control() rewards.ControllerState { return t.control }

// rewardSettingsOf, referenceSettingsOf, learnSettingsOf and
// controlSettingsOf cut the stage settings out of d.
func rewardSettingsOf(d *Deps) rewardSettings {
	s := rewardSettings{fns: d.Rewards, prepare: d.Prepare}
	if d.ShuffleRewards {
		s.shuffleSeed = stageSeed(d.Cfg.Train.Seed, 0, stageShuffle, 0) | 1
	}
	return s
}

func referenceSettingsOf(d *Deps) referenceSettings {
	return referenceSettings{temperature: d.Cfg.Generation.Temperature, lengthNormalize: d.Cfg.MaxEnt.LengthNormalizeRef}
}

func learnSettingsOf(d *Deps) learnSettings {
	return learnSettings{objective: d.Prepare.Objective, loss: d.Loss, alpha: d.Cfg.MaxEnt.Alpha, alphaCtl: d.Alpha,
		temperature: d.Cfg.Generation.Temperature, vocab: d.Model.Vocab}
}

func controlSettingsOf(d *Deps) rewards.Controllers {
	return rewards.Controllers{Tau: d.Tau, Beta: d.Beta, Meta: d.Meta, Objective: d.Prepare.Objective}
}

// localStages calls every stage function directly.
type localStages struct {
	deps        *Deps
	policy      Sampler
	ref         Scorer
	learner     *gpu.Learner
	ctrl        rewards.ControllerState
	ctrlVersion int64
}

func (s *localStages) generate(_ context.Context, pb *messages.PromptBatch) (*messages.Rollouts, error) {
	return generate(s.policy, s.deps.Sample, s.deps.Tokenizer, "generator-0", pb)
}

func (s *localStages) score(_ context.Context, ro *messages.Rollouts) (*messages.Scored, error) {
	return score(rewardSettingsOf(s.deps), ro)
}

func (s *localStages) reference(_ context.Context, sc *messages.Scored) (*messages.RefScored, error) {
	return referenceScore(s.ref, referenceSettingsOf(s.deps), sc)
}

func (s *localStages) learn(_ context.Context, pb *messages.PreparedBatch) (*messages.StepReport, *gpu.Model, error) {
	r, err := learn(s.learner, learnSettingsOf(s.deps), pb)
	if err != nil {
		return nil, nil, err
	}
	return r, s.learner.Snapshot(), nil
}

func (s *localStages) control(_ context.Context, st *messages.StepStats) (*messages.ControllerState, error) {
	s.ctrl = control(controlSettingsOf(s.deps), s.ctrl, st)
	s.ctrlVersion++
	return controllerMessage(st.GetMeta(), s.ctrl, s.ctrlVersion), nil
}

func (s *localStages) publish(_ context.Context, policy *gpu.Model) error {
	s.policy = policy
	return nil
}
