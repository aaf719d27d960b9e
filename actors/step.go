package actors

import (
	"context"
	"fmt"
	"math"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
	"go.opentelemetry.io/otel/attribute"
)

// Step runs training step n of t, prompt to weight update, in the order
// it happens: the readable reference of what a step is, and what every run
// executes for every step. Its first half makes the batch (the weights it
// is generated from to the generators, prompts, completions, rewards,
// reference log-probs); its second half trains on it (weights and
// advantages, one optimiser step, the new weights on their way to the
// generators, one controller update).
//
// Each stage is one plain function on the step's parts: generate
// (generator.go), score (reward.go), referenceScore (reference.go),
// prepare (prepare.go, always here), learn (learner.go), control
// (controller.go). t.stages says where the others run: localStages
// (trainer.go, a Trainer from NewTrainer) calls them in this goroutine;
// actorStages (actorstages.go, a Trainer from StartPipeline) hands the
// parts to the coordinator, whose pools send each to a stage actor that
// calls the same function. In synchronous mode both give bit-identical
// outcomes for the same seed (TestPipelineMatchesStep, TestDriveMatchesStep).
//
// p is the pace of the run (drive.go): batches are made in step order, and
// the learner takes steps in order, each once the one before is over, so a
// run that makes step n+1's batch while step n learns
// (train.max_staleness > 0) runs ahead of the learner; p.over hands the
// step's outcome to whoever records it. inOrder is the pace of steps
// called one after another.
func Step(ctx context.Context, t *Trainer, n int64, p pace) (*Outcome, error) {
	if err := p.turn(ctx, n, making); err != nil { // the batch before this one is made
		return nil, err
	}
	ctx, root := t.startStep(ctx, n)                   // one trace per step
	t.doing(n, making)                                 // what the progress output says of a step that takes long (busy.go)
	batch, err := t.produce(ctx, n)                    // PolicyWeights → PromptBatch → Rollouts → Scored → RefScored
	if terr := p.turn(ctx, n, learning); terr != nil { // the steps before this one are over
		t.done(n)
		endSpan(root, terr)
		return nil, terr
	}
	var out *Outcome
	if err == nil { // a step half learned would be lost: learning is not cut short
		t.doing(n, learning)
		out, err = t.consume(context.WithoutCancel(ctx), n, batch, p.goesOn(n)) // PreparedBatch → StepReport → PolicyWeights → ControllerUpdate
	}
	t.done(n)
	t.advance(n) // learned or skipped, step n is over
	defer endSpan(root, err)
	return out, p.over(ctx, n, out, err) // recorded in the step's trace
}

// phase is a half of a step: making its batch, or learning from it.
type phase int

const (
	making phase = iota
	learning
)

// pace is what a driver hands Step: when each half of a step may begin,
// and what becomes of its outcome.
type pace interface {
	// turn returns once step n may begin ph: making its batch once the
	// step before has made its own, learning once the steps before it are
	// over. Its error (the run is ending) drops step n, unrecorded.
	turn(ctx context.Context, n int64, ph phase) error
	// over takes step n's outcome, or the error that skipped it, and
	// returns the error Step returns.
	over(ctx context.Context, n int64, out *Outcome, err error) error
	// goesOn reports whether a step after n is to be made: the weights
	// step n makes are then sent on as it ends (publishNext).
	goesOn(n int64) bool
}

// inOrder is the pace of steps called one after another: every turn has
// come, another step may follow, and Step returns its own error.
var inOrder pace = sequential{}

type sequential struct{}

func (sequential) turn(context.Context, int64, phase) error { return nil }

func (sequential) over(_ context.Context, _ int64, _ *Outcome, err error) error { return err }

func (sequential) goesOn(int64) bool { return true }

// startStep starts step n's trace: its root span, a new trace whose
// sampling (trace.sample_ratio) every span of the step follows.
func (t *Trainer) startStep(ctx context.Context, n int64) (context.Context, oteltrace.Span) {
	return t.tracer.Start(ctx, spanStep, oteltrace.WithNewRoot(), oteltrace.WithAttributes(
		attrRun.String(t.runID), attrStep.Int64(n+1)))
}

// produce makes step n's batch: the weights it is generated from to the
// generators (publishFor), prompts, completions (incomplete groups
// re-sampled, as the original's prepare_generation_batch), rewards (zero-
// variance groups dropped and refilled under dynamic sampling) and
// reference log-probs. Without dynamic sampling the batch that is
// generated is the batch that is scored and reference-scored, so each part
// goes through the three stages at once (generateReference).
func (t *Trainer) produce(ctx context.Context, n int64) (*produced, error) {
	start := time.Now()
	if err := t.publishFor(ctx, n); err != nil { // PolicyWeights to the generators
		return nil, skip(messages.Stage_SYNC, err)
	}
	synced := time.Since(start)
	if !t.settings.dynamic {
		ref, err := t.generateReference(ctx, n) // PromptBatch → Rollouts → Scored → RefScored, part by part
		if err != nil {
			return nil, err
		}
		return &produced{ref: ref, sync: synced, generate: time.Since(start) - synced}, nil
	}
	ro, err := t.rollouts(ctx, n, 0, t.settings.prompts) // PromptBatch → Rollouts: generate, incomplete groups again
	if err != nil {
		return nil, err
	}
	sc, err := t.score(ctx, ro) // Scored: what the reward functions say (score)
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	if sc, err = t.refill(ctx, n, sc); err != nil {
		return nil, err
	}
	generated := time.Since(start)
	ref, err := t.reference(ctx, sc) // RefScored: reference log-probs (referenceScore)
	if err != nil {
		return nil, skip(messages.Stage_REFERENCE, err)
	}
	return &produced{ref: ref, sync: synced, generate: generated - synced, reference: time.Since(start) - generated}, nil
}

// consume trains on step n's batch: weights and advantages at the current
// controller state, one optimiser step, the new weights to the generators
// when the next batch is generated from them and a step follows (next;
// publishNext: they travel while the step ends, else publishFor sends them
// as a batch generated from them is produced) and one controller update.
func (t *Trainer) consume(ctx context.Context, n int64, b *produced, next bool) (*Outcome, error) {
	start := time.Now()
	used := t.control
	_, span := t.tracer.Start(ctx, spanPrepare, oteltrace.WithAttributes(attrObjective.String(string(t.settings.prepare.Objective)),
		attrTau.Float64(used.GetTau()), attrBeta.Float64(used.GetBeta())))
	prepared, p, err := prepare(t.settings.prepare, b.ref, used) // PreparedBatch: advantages, weights
	endSpan(span, err)
	if err != nil {
		return nil, skip(messages.Stage_PREPARE, err)
	}
	trace.Inject(ctx, prepared.GetMeta())
	lr, err := t.stages.learn(ctx, prepared) // StepReport, new weights (learn: loss, backward, AdamW; a snapshot)
	if err != nil {
		return nil, stateErr(messages.Stage_LEARN, err)
	}
	report := lr.report
	t.policy = lr.policy
	learned := time.Since(start)
	published := t.publishNext(ctx, n, next) // PolicyWeights to the generators, on their way while the step ends
	st := stepStats(report, p)
	trace.Inject(ctx, st.GetMeta())
	up, err := t.stages.control(ctx, st) // the controller state for the next step (control)
	if err != nil {
		return nil, stateErr(messages.Stage_CONTROL, err)
	}
	t.control = up.GetState()
	return &Outcome{Report: report, Prepared: p, Scored: b.ref.GetScored(), Control: used, Update: up,
		Timings: map[string]time.Duration{
			"generate_reward": b.generate, "reference": b.reference, "learn": learned - lr.snapshot,
			"control": time.Since(start) - learned - published, "weight_sync": b.sync + lr.snapshot + published,
		}}, nil
}

// produced is a batch ready for the learner, with how long it took:
// sync the weights' hand-over, generate generation and rewards (refills
// included; the reference log-probs too when each part goes through the
// three stages at once), reference the reference log-probs (0 then).
type produced struct {
	ref                       *messages.RefScored
	sync, generate, reference time.Duration
}

// Outcome is one step's result: the learner's report, what rewards.Prepare
// derived from the batch, the scored batch, the controller state the step
// was weighted with and the controller's update after it.
type Outcome struct {
	Report   *messages.StepReport
	Prepared *rewards.Prepared
	Scored   *messages.Scored
	Control  *messages.ControllerState
	Update   *messages.ControllerUpdate
	Timings  map[string]time.Duration // by stage: generate_reward, reference, learn, control, weight_sync
}

// stepStats are the statistics of a step that the controllers read. A
// batch without listwise weights has no weight entropy (NaN), so that the
// meta-controller takes no tau gradient from it under GRPO (spec §2.3).
func stepStats(r *messages.StepReport, p *rewards.Prepared) *messages.StepStats {
	h := math.NaN()
	if p.Stats.HasWeights {
		h = p.Stats.Weight.Mean
	}
	return &messages.StepStats{Meta: messages.DeriveMeta(r.GetMeta()), WeightEntropy: h, Kl: r.GetKl(),
		PolicyEntropy: r.GetEntropy()}
}

// rollouts generates round's n prompts of step, re-sampling groups that
// came back incomplete for up to generation.retry_rounds rounds and
// dropping those still incomplete.
func (t *Trainer) rollouts(ctx context.Context, step, round int64, n int) (*messages.Rollouts, error) {
	pb, err := promptBatch(t.settings, t.runID, step, round, n, t.version.Load())
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	ro, err := t.generate(ctx, pb)
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	return t.complete(ctx, step, round, ro)
}

// complete re-samples the groups of round's rollouts ro of step that came
// back incomplete, for up to generation.retry_rounds rounds, and drops
// those still incomplete.
func (t *Trainer) complete(ctx context.Context, step, round int64, ro *messages.Rollouts) (*messages.Rollouts, error) {
	var err error
	for r := int64(1); r <= int64(t.settings.retries); r++ {
		bad := incompleteGroups(ro)
		if len(bad) == 0 {
			break
		}
		retry := reseed(messages.SelectPrompts(promptsOf(ro), bad), stageSeed(t.settings.seed, step, stageGenerate, uint64(round+r)))
		fresh, err := t.generate(ctx, retry)
		if err != nil {
			return nil, skip(messages.Stage_GENERATE, err)
		}
		if ro, err = retryGroups(ro, bad, fresh); err != nil {
			return nil, skip(messages.Stage_GENERATE, err)
		}
	}
	if ro, err = dropIncomplete(ro); err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	return ro, nil
}

// generateReference makes step n's batch without dynamic sampling: each
// part generated, scored and reference-scored in one pass (a chain of the
// three stages) or, when a part comes back as rollouts (a group left
// incomplete, or no reward evaluator had a reference scorer beside it),
// the whole batch as rollouts and scoreReference make it from the
// rollouts: the same batch either way.
func (t *Trainer) generateReference(ctx context.Context, n int64) (*messages.RefScored, error) {
	pb, err := promptBatch(t.settings, t.runID, n, 0, t.settings.prompts, t.version.Load())
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	parts := messages.SplitPrompts(pb, t.settings.perPart)
	sctx, span := t.stageSpan(ctx, spanGenerateReference, len(parts), attrPrompts.Int(len(pb.GetPrompts())))
	cs, err := t.stages.generateReference(sctx, withSpan(sctx, parts))
	endSpan(span, err)
	if err != nil {
		return nil, skip(messages.Stage_GENERATE, err)
	}
	refs, ros := make([]*messages.RefScored, len(cs)), make([]*messages.Rollouts, len(cs))
	whole := true
	for i, c := range cs {
		refs[i], ros[i] = c.ref, c.ro
		if c.ref != nil {
			ros[i] = c.ref.GetScored().GetRollouts()
		}
		whole = whole && c.ref != nil
	}
	meta := messages.DeriveMeta(pb.GetMeta()) // as generate joins the parts' rollouts
	meta.PolicyVersion = ros[0].GetMeta().GetPolicyVersion()
	if whole {
		rs, err := messages.JoinRefScored(messages.DeriveMeta(meta), refs)
		if err != nil {
			return nil, skip(messages.Stage_REFERENCE, err)
		}
		return rs, nil
	}
	ro := ros[0]
	if len(ros) > 1 {
		if ro, err = messages.JoinRollouts(meta, ros, nil); err != nil {
			return nil, skip(messages.Stage_GENERATE, err)
		}
	}
	if ro, err = t.complete(ctx, n, 0, ro); err != nil {
		return nil, err
	}
	return t.scoreReference(ctx, ro) // Scored → RefScored, part by part: score, then referenceScore
}

// chained is one part's answer to generateReference: its reference-scored
// batch, or its rollouts.
type chained struct {
	ref *messages.RefScored
	ro  *messages.Rollouts
}

// refill applies dynamic sampling (DAPO): groups with equal utilities are
// dropped and refill rounds of fresh prompts top the batch up, at most
// train.dynamic_sampling_max_rounds of them; a batch left with no varied
// group is skipped.
func (t *Trainer) refill(ctx context.Context, step int64, sc *messages.Scored) (*messages.Scored, error) {
	want, zeroTruncated := t.settings.prompts, t.settings.zeroTruncated
	keep, err := variedGroups(sc, zeroTruncated)
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	parts, keeps := []*messages.Scored{sc}, [][]int{keep}
	have := len(keep)
	for r := 1; have < want && r <= t.settings.refills; r++ {
		ro, err := t.rollouts(ctx, step, refillRound+int64(r), want)
		if err != nil {
			return nil, err
		}
		more, err := t.score(ctx, ro)
		if err != nil {
			return nil, skip(messages.Stage_REWARD, err)
		}
		k, err := variedGroups(more, zeroTruncated)
		if err != nil {
			return nil, skip(messages.Stage_REWARD, err)
		}
		parts, keeps, have = append(parts, more), append(keeps, k), have+len(k)
	}
	if have == 0 {
		return nil, skip(messages.Stage_REWARD, fmt.Errorf("step %d: %w", step+1, ErrZeroVariance)) // step n is the run's step n+1
	}
	out, err := messages.JoinScored(messages.DeriveMeta(sc.GetMeta()), parts, keeps)
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	if out, err = firstGroups(out, want); err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	return out, nil
}

// generate has the generators sample pb, cut into parts of
// train.prompts_per_part prompts, and joins their rollouts in order.
func (t *Trainer) generate(ctx context.Context, pb *messages.PromptBatch) (ro *messages.Rollouts, err error) {
	parts := messages.SplitPrompts(pb, t.settings.perPart)
	ctx, span := t.stageSpan(ctx, spanGenerate, len(parts), attrPrompts.Int(len(pb.GetPrompts())))
	defer func() { endSpan(span, err) }()
	ros, err := t.stages.generate(ctx, withSpan(ctx, parts))
	if err != nil || len(ros) == 1 {
		return first(ros, err)
	}
	meta := messages.DeriveMeta(pb.GetMeta())
	meta.PolicyVersion = ros[0].GetMeta().GetPolicyVersion()
	return messages.JoinRollouts(meta, ros, nil)
}

// stageSpan starts the span of a stage spread over parts.
func (t *Trainer) stageSpan(ctx context.Context, name string, parts int, attrs ...attribute.KeyValue) (context.Context, oteltrace.Span) {
	return t.tracer.Start(ctx, name, oteltrace.WithAttributes(append(attrs, attrPart.Int(parts))...))
}

// score has the reward evaluators score ro, part by part.
func (t *Trainer) score(ctx context.Context, ro *messages.Rollouts) (sc *messages.Scored, err error) {
	parts, err := messages.SplitGroups(ro, t.settings.perPart)
	if err != nil {
		return nil, err
	}
	ctx, span := t.stageSpan(ctx, spanReward, len(parts), attrSamples.Int(len(ro.GetRollouts())))
	defer func() { endSpan(span, err) }()
	scs, err := t.stages.score(ctx, withSpan(ctx, parts))
	if err != nil || len(scs) == 1 {
		return first(scs, err)
	}
	return messages.JoinScored(messages.DeriveMeta(ro.GetMeta()), scs, nil)
}

// reference has the reference scorers score sc, part by part.
func (t *Trainer) reference(ctx context.Context, sc *messages.Scored) (rs *messages.RefScored, err error) {
	parts, err := messages.SplitScored(sc, t.settings.perPart)
	if err != nil {
		return nil, err
	}
	ctx, span := t.stageSpan(ctx, spanReference, len(parts), attrSamples.Int(len(sc.GetRollouts().GetRollouts())))
	defer func() { endSpan(span, err) }()
	rss, err := t.stages.reference(ctx, withSpan(ctx, parts))
	if err != nil || len(rss) == 1 {
		return first(rss, err)
	}
	return messages.JoinRefScored(messages.DeriveMeta(sc.GetMeta()), rss)
}

// scoreReference has each part of ro scored and reference-scored in one
// pass, the reference scorer taking the Scored part its reward evaluator
// made (beside it where a node serves both: no trip back in between).
func (t *Trainer) scoreReference(ctx context.Context, ro *messages.Rollouts) (rs *messages.RefScored, err error) {
	parts, err := messages.SplitGroups(ro, t.settings.perPart)
	if err != nil {
		return nil, skip(messages.Stage_REWARD, err)
	}
	ctx, span := t.stageSpan(ctx, spanRewardReference, len(parts), attrSamples.Int(len(ro.GetRollouts())))
	defer func() { endSpan(span, err) }()
	rss, err := t.stages.scoreReference(ctx, withSpan(ctx, parts))
	if err == nil && len(rss) > 1 {
		rs, err = messages.JoinRefScored(messages.DeriveMeta(ro.GetMeta()), rss)
	} else {
		rs, err = first(rss, err)
	}
	if err != nil {
		return nil, skip(messages.Stage_REFERENCE, err)
	}
	return rs, nil
}

// first is the only reply of a stage that was given one part.
func first[T any](xs []T, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if len(xs) != 1 {
		return zero, fmt.Errorf("%d replies to one part: %w", len(xs), messages.ErrShape)
	}
	return xs[0], nil
}
