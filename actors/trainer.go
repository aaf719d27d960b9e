package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

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
	// scoreReference scores each part and reference-scores the Scored it
	// becomes: score and reference in one pass over the parts.
	scoreReference(ctx context.Context, parts []*messages.Rollouts) ([]*messages.RefScored, error)
	// generateReference generates each part and, where it can, scores and
	// reference-scores its rollouts in the same pass: generate, score and
	// reference as a chain.
	generateReference(ctx context.Context, parts []*messages.PromptBatch) ([]chained, error)
	learn(ctx context.Context, pb *messages.PreparedBatch) (*learnerReply, error)
	control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error)
	// publish hands the new weights to the generators.
	publish(ctx context.Context, policy *gpu.Model) error
	// checkpoint asks the learner to write its policy and optimiser into dir.
	checkpoint(ctx context.Context, dir string) error
	// stats counts the parts sent again because their actor was lost and
	// measures the newest weight sync to remote generators.
	stats(ctx context.Context) ClusterStats
	// parts counts the parts of the stage requests in flight (busy.go).
	parts(ctx context.Context) partsInFlight
}

// Trainer drives a run's steps through its stages. Between steps it holds
// only what the stages sent it: the controller state the next batch is
// weighted with, the newest policy weights, and the weights of the few
// earlier steps that batches still to be generated are defined to use
// (sourceStep).
type Trainer struct {
	settings stepSettings
	runID    string
	tracer   oteltrace.Tracer
	stages   stages
	control  *messages.ControllerState // as the controller sent it, whole
	policy   *gpu.Model                // the learner's newest weights (read-only snapshot)
	version  atomic.Int64              // the version generators sample from; read by produce while consume publishes

	mu      sync.Mutex
	weights map[int64]*gpu.Model // read-only snapshots by step: the policy after that many steps
	synced  int64                // the step whose weights the generators hold
	active  map[int64]activity   // what the steps not yet over are doing (busy.go)
}

// Models are a run's models after the warm start: the learner (owning the
// trainable weights), the frozen reference and the policy the generators
// start from (a snapshot of the learner).
type Models struct {
	Learner   *gpu.Learner
	Reference Scorer
	Policy    Sampler
	// Step is the step the learner's weights (and Policy) are after: 0 for
	// a new run, the checkpoint's step on resume.
	Step int64
	// Behaviour holds, by step, the weights of steps before Step that the
	// first batches after it are generated from in asynchronous mode
	// (sourceStep): a checkpoint's, so a resumed run generates what the
	// uninterrupted run generated.
	Behaviour map[int64]*gpu.Model
}

// NewTrainer returns a trainer of run runID whose stages are plain calls
// in the caller's goroutine (Step's reference driver), starting from
// controller state cs. It reports no spans.
func NewTrainer(s *settings, runID string, m Models, cs rewards.ControllerState) *Trainer {
	local := &localStages{stages: s.stages, learning: s.learn, controllers: s.control,
		policy: m.Policy, ref: m.Reference, learner: m.Learner, state: cs}
	return newTrainer(s.step, runID, quiet().tracer, local, m, cs)
}

func newTrainer(s stepSettings, runID string, tr oteltrace.Tracer, st stages, m Models, cs rewards.ControllerState) *Trainer {
	t := &Trainer{settings: s, runID: runID, tracer: tr, stages: st, control: controllerMessage(nil, cs),
		policy: m.Learner.Snapshot(), weights: map[int64]*gpu.Model{}, synced: m.Step, active: map[int64]activity{}}
	for step, w := range m.Behaviour {
		t.weights[step] = w
	}
	t.weights[m.Step] = t.policy
	t.version.Store(m.Policy.Version())
	return t
}

// sourceStep is the step whose weights generate batch n: with
// train.max_staleness s the batch after the learner's step n − ahead + 1
// (ahead = batchesAhead), rounded down to a multiple of train.sync_every,
// and at least 0; n itself in synchronous mode. Each batch's weights are
// a function of its step, never of how fast generators and learner ran,
// so asynchronous runs are reproducible and resume exactly; samples are at
// most s steps old (batchesAhead).
func (t *Trainer) sourceStep(n int64) int64 {
	c := t.settings
	if c.staleness == 0 {
		return n
	}
	every := int64(max(c.syncEvery, 1))
	src := max(n-int64(batchesAhead(c.staleness, c.syncEvery))+1, 0)
	return src / every * every
}

// advance records that step n is over, learned or skipped: t.policy, the
// weights after n+1 steps, is kept, and so are those of earlier steps that
// a batch from n+1 on is generated from; the others are dropped.
func (t *Trainer) advance(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.weights[n+1] = t.policy
	oldest, every := t.sourceStep(n+1), int64(max(t.settings.syncEvery, 1))
	for step := range t.weights {
		if step < oldest || (step <= n && t.settings.staleness > 0 && step%every != 0) {
			delete(t.weights, step)
		}
	}
}

// Behaviour returns the weights of steps before step that batches from
// step on are generated from (empty in synchronous mode): what a
// checkpoint of step must hold besides the learner's own weights.
func (t *Trainer) Behaviour(step int64) map[int64]*gpu.Model {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int64]*gpu.Model{}
	for s, w := range t.weights {
		if s < step && s >= t.sourceStep(step) {
			out[s] = w
		}
	}
	return out
}

// publishFor hands the generators the weights batch n is generated from
// (sourceStep), unless they hold them already: publishNext sent them as
// the step before ended, or they are the same policy version. Batches are
// produced in step order, each after the steps its weights come from are
// over (drive's slots), so the weights are known.
func (t *Trainer) publishFor(ctx context.Context, n int64) error {
	src := t.sourceStep(n)
	t.mu.Lock()
	w, ok := t.weights[src]
	synced := t.synced
	t.mu.Unlock()
	if src == synced {
		return nil
	}
	if !ok {
		return fmt.Errorf("step %d: the weights of step %d, which it is generated from, are unknown (steps run out of order)", n, src)
	}
	return t.publishStep(ctx, src, w)
}

// publishNext hands the generators the weights that step n has just made
// when the next batch is generated from them (synchronous mode) and a step
// follows (next): their trip to remote generators, and the building of
// the model there, then overlap the end of step n (the controller update,
// the recording, the next batch's prompts) instead of holding up the next
// batch's generation. No later batch is asked for before they are sent,
// so a generator still samples with the weights published before it was
// asked. It returns how long the hand-over took. A publication that fails
// here is tried again by the next batch's publishFor, which skips it if
// it fails again.
func (t *Trainer) publishNext(ctx context.Context, n int64, next bool) time.Duration {
	if !next || t.settings.staleness > 0 {
		return 0
	}
	start := time.Now()
	_ = t.publishStep(ctx, n+1, t.policy) // on failure the generators keep the weights they hold (t.synced)
	return time.Since(start)
}

// publishStep hands the generators w, the weights after src steps, unless
// they hold its version already (the steps between were skipped: the same
// version is the same weights).
func (t *Trainer) publishStep(ctx context.Context, src int64, w *gpu.Model) error {
	if w.Version() != t.version.Load() {
		if err := t.stages.publish(ctx, w); err != nil {
			return err
		}
	}
	t.mu.Lock()
	t.synced = src
	t.mu.Unlock()
	t.version.Store(w.Version())
	return nil
}

// Control returns the controller state the next step's weights use.
func (t *Trainer) Control() rewards.ControllerState { return controllerState(t.control) }

// Policy returns the learner's newest weights.
func (t *Trainer) Policy() *gpu.Model { return t.policy }

// ClusterStats are a cluster's counters since the run (or resume) began.
type ClusterStats struct {
	// Reissued counts the parts of any stage sent again because the actor
	// doing them was lost (a worker node died or hung).
	Reissued int
	// Hedged counts the parts sent to a second node because they ran long
	// on the first (cluster.hedge).
	Hedged int
	// BadAnswers counts the malformed answers of stage actors (a worker
	// node's, redone elsewhere, or this process's, skipped).
	BadAnswers int
	// Sync measures the newest weight sync every remote generator
	// acknowledged.
	Sync SyncMeasure
}

// ClusterStats returns the cluster's counters.
func (t *Trainer) ClusterStats(ctx context.Context) ClusterStats {
	return t.stages.stats(ctx)
}

// Checkpoint has the learner write its policy and optimiser state into dir
// (between steps).
func (t *Trainer) Checkpoint(ctx context.Context, dir string) error {
	return t.stages.checkpoint(ctx, dir)
}

// localStages calls every stage function directly, part after part.
type localStages struct {
	stages      stageSettings
	learning    learnSettings
	controllers rewards.Controllers
	policy      Sampler
	ref         Scorer
	learner     *gpu.Learner
	state       rewards.ControllerState
}

func (s *localStages) generate(_ context.Context, parts []*messages.PromptBatch) ([]*messages.Rollouts, error) {
	return each(parts, func(pb *messages.PromptBatch) (*messages.Rollouts, error) {
		return generate(s.policy, s.stages.generate, "generator-0", pb)
	})
}

func (s *localStages) score(_ context.Context, parts []*messages.Rollouts) ([]*messages.Scored, error) {
	return each(parts, func(ro *messages.Rollouts) (*messages.Scored, error) { return score(s.stages.reward, ro) })
}

func (s *localStages) reference(_ context.Context, parts []*messages.Scored) ([]*messages.RefScored, error) {
	return each(parts, func(sc *messages.Scored) (*messages.RefScored, error) {
		return referenceScore(s.ref, s.stages.reference, sc)
	})
}

func (s *localStages) scoreReference(_ context.Context, parts []*messages.Rollouts) ([]*messages.RefScored, error) {
	return each(parts, func(ro *messages.Rollouts) (*messages.RefScored, error) {
		sc, err := score(s.stages.reward, ro)
		if err != nil {
			return nil, skip(messages.Stage_REWARD, err)
		}
		return referenceScore(s.ref, s.stages.reference, sc)
	})
}

func (s *localStages) generateReference(_ context.Context, parts []*messages.PromptBatch) ([]chained, error) {
	return each(parts, func(pb *messages.PromptBatch) (chained, error) {
		ro, err := generate(s.policy, s.stages.generate, "generator-0", pb)
		if err != nil {
			return chained{}, skip(messages.Stage_GENERATE, err)
		}
		if len(incompleteGroups(ro)) > 0 {
			return chained{ro: ro}, nil
		}
		rs, err := s.scoreReference(context.Background(), []*messages.Rollouts{ro})
		if err != nil {
			return chained{}, err
		}
		return chained{ref: rs[0]}, nil
	})
}

func (s *localStages) learn(ctx context.Context, pb *messages.PreparedBatch) (*learnerReply, error) {
	r, err := learn(s.learner, s.learning, pb)
	if err != nil {
		return nil, err
	}
	policy, took := snapshot(ctx, quiet().tracer, s.learner)
	return &learnerReply{report: r, policy: policy, snapshot: took}, nil
}

func (s *localStages) control(_ context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	var up *messages.ControllerUpdate
	s.state, up = control(s.controllers, s.state, st)
	return up, nil
}

func (s *localStages) publish(_ context.Context, policy *gpu.Model) error {
	s.policy = policy
	return nil
}

func (s *localStages) stats(context.Context) ClusterStats { return ClusterStats{} }

func (s *localStages) parts(context.Context) partsInFlight { return partsInFlight{} }

func (s *localStages) checkpoint(_ context.Context, dir string) error {
	return saveLearner(s.learner, s.learning.tokenizer, dir)
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
