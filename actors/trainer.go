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
// (actorStages, the pipeline). Both call the same plain functions, on the
// same parts: generation, rewards and reference scoring take a step's batch
// cut into train.prompts_per_part groups, so where a part runs never
// changes what it returns.
type stages interface {
	generate(ctx context.Context, parts []*messages.PromptBatch) ([]*messages.Rollouts, error)
	score(ctx context.Context, parts []*messages.Rollouts) ([]*messages.Scored, error)
	reference(ctx context.Context, parts []*messages.Scored) ([]*messages.RefScored, error)
	learn(ctx context.Context, pb *messages.PreparedBatch) (*messages.StepReport, *gpu.Model, error)
	control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error)
	// publish hands the new weights to the generators.
	publish(ctx context.Context, policy *gpu.Model) error
	// checkpoint asks the learner to write its policy and optimiser into dir.
	checkpoint(ctx context.Context, dir string) error
	// stats counts the parts sent again because their actor was lost and
	// measures the newest weight sync to remote generators.
	stats(ctx context.Context) (reissued int, sync SyncMeasure)
}

// Trainer drives a run's steps through its stages. Between steps it holds
// only what the stages sent it: the controller state the next batch is
// weighted with and the newest policy weights.
type Trainer struct {
	deps    *Deps
	stages  stages
	control *messages.ControllerState // as the controller sent it, whole
	policy  *gpu.Model                // the learner's newest weights (read-only snapshot)
	version atomic.Int64              // the version generators sample from; read by produce while consume publishes
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
	return newTrainer(d, &localStages{deps: d, policy: m.Policy, ref: m.Reference, learner: m.Learner, ctrl: cs}, m, cs)
}

func newTrainer(d *Deps, s stages, m Models, cs rewards.ControllerState) *Trainer {
	t := &Trainer{deps: d, stages: s, control: controllerMessage(nil, cs), policy: m.Learner.Snapshot()}
	t.version.Store(m.Policy.Version())
	return t
}

// Control returns the controller state the next step's weights use.
func (t *Trainer) Control() rewards.ControllerState { return controllerState(t.control) }

// Policy returns the learner's newest weights.
func (t *Trainer) Policy() *gpu.Model { return t.policy }

// ClusterStats count the parts of any stage that were sent again because
// the actor doing them was lost (a worker node died or hung), and measure
// the newest weight sync that every remote generator acknowledged.
func (t *Trainer) ClusterStats(ctx context.Context) (reissued int, sync SyncMeasure) {
	return t.stages.stats(ctx)
}

// Checkpoint has the learner write its policy and optimiser state into dir
// (between steps).
func (t *Trainer) Checkpoint(ctx context.Context, dir string) error {
	return t.stages.checkpoint(ctx, dir)
}

// rewardSettingsOf, referenceSettingsOf, learnSettingsOf and
// controlSettingsOf cut the stage settings out of d.
func rewardSettingsOf(d *Deps) rewardSettings {
	s := rewardSettings{fns: d.Rewards}
	if d.Cfg.Rewards.Shuffle {
		s.shuffleSeed = stageSeed(d.Cfg.Train.Seed, 0, stageShuffle, 0) | 1
	}
	return s
}

func referenceSettingsOf(d *Deps) referenceSettings {
	return referenceSettings{temperature: d.Cfg.Generation.Temperature}
}

func learnSettingsOf(d *Deps) learnSettings {
	return learnSettings{objective: d.Prepare.Objective, loss: d.Loss, alpha: d.Cfg.MaxEnt.Alpha, alphaCtl: d.Alpha,
		temperature: d.Cfg.Generation.Temperature, vocab: d.Model.Vocab, tokenizer: d.Tokenizer}
}

func controlSettingsOf(d *Deps) rewards.Controllers {
	return rewards.Controllers{Tau: d.Tau, Beta: d.Beta, Meta: d.Meta, Objective: d.Prepare.Objective}
}

// localStages calls every stage function directly, part after part.
type localStages struct {
	deps    *Deps
	policy  Sampler
	ref     Scorer
	learner *gpu.Learner
	ctrl    rewards.ControllerState
}

func (s *localStages) generate(_ context.Context, parts []*messages.PromptBatch) ([]*messages.Rollouts, error) {
	return each(parts, func(pb *messages.PromptBatch) (*messages.Rollouts, error) {
		return generate(s.policy, s.deps.Sample, s.deps.Tokenizer, "generator-0", pb)
	})
}

func (s *localStages) score(_ context.Context, parts []*messages.Rollouts) ([]*messages.Scored, error) {
	settings := rewardSettingsOf(s.deps)
	return each(parts, func(ro *messages.Rollouts) (*messages.Scored, error) { return score(settings, ro) })
}

func (s *localStages) reference(_ context.Context, parts []*messages.Scored) ([]*messages.RefScored, error) {
	settings := referenceSettingsOf(s.deps)
	return each(parts, func(sc *messages.Scored) (*messages.RefScored, error) { return referenceScore(s.ref, settings, sc) })
}

func (s *localStages) learn(_ context.Context, pb *messages.PreparedBatch) (*messages.StepReport, *gpu.Model, error) {
	r, err := learn(s.learner, learnSettingsOf(s.deps), pb)
	if err != nil {
		return nil, nil, err
	}
	return r, s.learner.Snapshot(), nil
}

func (s *localStages) control(_ context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	var up *messages.ControllerUpdate
	s.ctrl, up = control(controlSettingsOf(s.deps), s.ctrl, st)
	return up, nil
}

func (s *localStages) publish(_ context.Context, policy *gpu.Model) error {
	s.policy = policy
	return nil
}

func (s *localStages) stats(context.Context) (int, SyncMeasure) { return 0, SyncMeasure{} }

func (s *localStages) checkpoint(_ context.Context, dir string) error {
	return saveLearner(s.learner, s.deps.Tokenizer, dir)
}

// each applies f to every part in order; the first error stops it.
func each[In, Out any](parts []In, f func(In) (Out, error)) ([]Out, error) {
	out := make([]Out, len(parts))
	for i, p := range parts {
		var err error
		if out[i], err = f(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}
