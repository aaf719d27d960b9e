package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// Step runs training step n, in order, as plain calls: the readable
// reference of what a step is. With a Trainer from NewTrainer every stage
// runs in this goroutine; with one from StartPipeline the same stage
// functions run on the actors, and in synchronous mode both give
// bit-identical reports for the same seed (TestPipelineMatchesStep).
func Step(ctx context.Context, t *Trainer, n int64) (*messages.StepReport, error) {
	batch, err := t.produce(ctx, n) // PromptBatch → Rollouts → Scored → RefScored
	if err != nil {
		return nil, err
	}
	out, err := t.consume(ctx, batch) // PreparedBatch → StepReport → ControllerState → weights
	if err != nil {
		return nil, err
	}
	return out.Report, nil
}

// produce makes step n's batch: prompts, completions (incomplete groups
// re-sampled, as the original's prepare_generation_batch), rewards (zero-
// variance groups dropped and refilled under dynamic sampling) and
// reference log-probs.
func (t *Trainer) produce(ctx context.Context, n int64) (*produced, error) {
	start := time.Now()
	ro, err := t.rollouts(ctx, n, 0, t.deps.Cfg.Train.PromptsPerStep)
	if err != nil {
		return nil, err
	}
	sc, err := t.stages.score(ctx, ro) // Scored: rewards, utilities, advantages
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	if t.deps.Cfg.Train.DynamicSampling {
		if sc, err = t.refill(ctx, n, sc); err != nil {
			return nil, err
		}
	}
	generated := time.Since(start)
	ref, err := t.stages.reference(ctx, sc) // RefScored: reference log-probs
	if err != nil {
		return nil, skip(messages.Stage_REFERENCE, err)
	}
	return &produced{ref: ref, generate: generated, reference: time.Since(start) - generated}, nil
}

// consume trains on one produced batch: weights and advantages at the
// current controller state, one optimiser step, one controller update,
// and the new weights to the generators.
func (t *Trainer) consume(ctx context.Context, b *produced) (*Outcome, error) {
	start := time.Now()
	prepared, stats, err := prepare(t.deps.Prepare, b.ref, t.control) // PreparedBatch
	if err != nil {
		return nil, skip(messages.Stage_PREPARE, err)
	}
	report, policy, err := t.stages.learn(ctx, prepared) // StepReport, new weights
	if err != nil {
		return nil, stateErr(messages.Stage_LEARN, err)
	}
	learned := time.Since(start)
	cs, err := t.stages.control(ctx, stepStats(report)) // ControllerState for the next step
	if err != nil {
		return nil, stateErr(messages.Stage_CONTROL, err)
	}
	t.control = controllerFromMessage(cs, t.deps.Meta)
	controlled := time.Since(start)
	if err := t.sync(ctx, policy); err != nil { // PolicyWeights to the generators
		return nil, skip(messages.Stage_SYNC, err)
	}
	return &Outcome{Report: report, Prepared: &stats.Stats, Scored: b.ref.GetScored(), Weights: prepared.GetWeights(), Timings: map[string]time.Duration{
		"generate_reward": b.generate, "reference": b.reference, "learn": learned,
		"control": controlled - learned, "sync": time.Since(start) - controlled,
	}}, nil
}

// produced is a batch ready for the learner, with how long it took:
// generate covers generation and rewards (refills included).
type produced struct {
	ref                 *messages.RefScored
	generate, reference time.Duration
}

// Outcome is one step's result: the learner's report, the reward-side
// statistics and the scored batch (for metrics and sample tables).
type Outcome struct {
	Report   *messages.StepReport
	Prepared *rewards.PrepareStats
	Scored   *messages.Scored
	Weights  []float64                // listwise weights (empty for other objectives)
	Timings  map[string]time.Duration // by stage: generate_reward, reference, learn, control, sync
}

// rollouts generates round's n prompts of step, re-sampling groups that
// came back incomplete for up to generation.retry_rounds rounds and
// dropping those still incomplete.
func (t *Trainer) rollouts(ctx context.Context, step, round int64, n int) (*messages.Rollouts, error) {
	pb, err := promptBatch(t.deps, step, round, n, t.version.Load())
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	ro, err := t.stages.generate(ctx, pb)
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	for r := int64(1); r <= int64(t.deps.Cfg.Generation.RetryRounds); r++ {
		bad := incompleteGroups(ro)
		if len(bad) == 0 {
			break
		}
		retry := subPrompts(promptsOf(ro), bad, stageSeed(t.deps.Cfg.Train.Seed, step, stageGenerate, uint64(round+r)))
		fresh, err := t.stages.generate(ctx, retry)
		if err != nil {
			return nil, skip(messages.Stage_GENERATE, err)
		}
		ro = retryGroups(ro, bad, fresh)
	}
	ro, _, err = dropIncomplete(ro)
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	return ro, nil
}

// refill applies dynamic sampling (DAPO): groups with equal utilities are
// dropped and refill rounds of fresh prompts top the batch up, at most
// train.dynamic_sampling_max_rounds of them; a batch left with no varied
// group is skipped.
func (t *Trainer) refill(ctx context.Context, step int64, sc *messages.Scored) (*messages.Scored, error) {
	want := t.deps.Cfg.Train.PromptsPerStep
	keep, err := variedGroups(sc)
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	parts, keeps := []*messages.Scored{sc}, [][]int{keep}
	have := len(keep)
	for r := 1; have < want && r <= t.deps.Cfg.Train.DynamicSamplingMaxRounds; r++ {
		ro, err := t.rollouts(ctx, step, refillRound+int64(r), want)
		if err != nil {
			return nil, err
		}
		more, err := t.stages.score(ctx, ro)
		if err != nil {
			return nil, skip(messages.Stage_REWARD, err)
		}
		k, err := variedGroups(more)
		if err != nil {
			return nil, skip(messages.Stage_REWARD, err)
		}
		parts, keeps, have = append(parts, more), append(keeps, k), have+len(k)
	}
	if have == 0 {
		return nil, skip(messages.Stage_REWARD, fmt.Errorf("step %d: %w", step, ErrZeroVariance))
	}
	out, err := concatScored(messages.DeriveMeta(sc.GetMeta()), parts, keeps)
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	if out, err = firstGroups(out, want); err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	return out, nil
}

// sync publishes new weights every train.sync_every steps (every step in
// synchronous mode, which is on-policy).
func (t *Trainer) sync(ctx context.Context, policy *gpu.Model) error {
	every := int64(max(t.deps.Cfg.Train.SyncEvery, 1))
	if t.deps.Cfg.Train.MaxStaleness > 0 && policy.Version()%every != 0 {
		return nil
	}
	if err := t.stages.publish(ctx, policy); err != nil {
		return err
	}
	t.version.Store(policy.Version())
	return nil
}

// promptsOf rebuilds the PromptBatch a Rollouts answers (for retries).
func promptsOf(ro *messages.Rollouts) *messages.PromptBatch {
	return &messages.PromptBatch{Meta: messages.DeriveMeta(ro.GetMeta()), Prompts: ro.GetPrompts(), NumGenerations: ro.GetNumGenerations()}
}
