package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/atomicfile"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// Keys of a skipped step's metrics line: 1, the Stage and the SkipReason
// (messages enums, as numbers).
const (
	keySkipped    = "train/skipped"
	keySkipStage  = "train/skip_stage"
	keySkipReason = "train/skip_reason"
)

// record writes step n's metrics (every output.log_every steps, and every
// skipped, evaluated or last step), sample table, evaluation, checkpoint
// and progress line. A skipped step (err a *SkipError) is recorded with
// its reason; any other error ends the run, and so does the
// train.max_skipped_steps-th skipped step in a row (a *stopError, once its
// metrics line is written).
func (r *runner) record(ctx context.Context, res stepResult) error {
	d := r.deps
	n, out, err, took := res.n, res.out, res.err, res.took
	step := int(n + 1)
	root := oteltrace.SpanFromContext(res.ctx)
	defer func() { endSpan(root, err) }()
	var skipErr *SkipError
	if err != nil && !errors.As(err, &skipErr) {
		return fmt.Errorf("step %d: %w", step, err)
	}
	m := map[string]float64{runlog.KeyStepTime: took.Seconds()}
	if skipErr != nil {
		r.skipped++
		m[keySkipped], m[keySkipStage], m[keySkipReason] = 1, float64(skipErr.Stage), float64(skipErr.Reason)
		r.progress.Note(fmt.Sprintf("step %d skipped: %s", step, clip(skipErr.Error())))
	} else {
		r.skipped = 0
		root.SetAttributes(stepAttrs(out)...)
		r.tokens += batchTokens(out.Scored)
		maps.Copy(m, stepMetrics(d, n, out, r.tokens))
		if every := d.Cfg.Output.SampleEvery; every > 0 && step%every == 0 {
			if err := r.dir.WriteSamples(step, runlog.StandardSampleColumns(out.Scored.GetRewardNames()), sampleRows(step, out, d.Cfg.Output.SampleRows),
				highKLTables(d.Tokenizer, out)...); err != nil {
				return err
			}
		}
	}
	if every := d.Cfg.Train.EvalEvery; every > 0 && step%every == 0 {
		_, span := d.Tracer.Start(res.ctx, spanEvaluate)
		acc, err := r.evaluate(ctx, r.trainer.Policy())
		endSpan(span, err)
		if err == nil {
			m[runlog.KeyEvalGreedyAccuracy] = acc
			r.evalStep, r.evalAccuracy = int64(step), acc
		}
	}
	if n, sync := r.trainer.ClusterStats(ctx); n > 0 || sync.Bytes > 0 {
		if n > 0 {
			m[runlog.KeyReissuedParts] = float64(n)
		}
		if sync.Bytes > 0 { // over a network, the newest acknowledged sync replaces the hand-over time
			m[runlog.KeyWeightSyncBytes], m[runlog.TimePrefix+"weight_sync_s"] = float64(sync.Bytes), sync.Seconds
		}
	}
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k)
		}
	}
	stop := r.watch(step, m, skipErr == nil)
	d.Meter.Step(step, skipErr != nil, m)
	traceID := trace.TraceID(res.ctx)
	if slow, threshold := r.slow.observe(time.Since(res.started)); slow {
		root.SetAttributes(attrSlow.Bool(true))
		note := fmt.Sprintf("step %d slow: %.2fs (threshold %.2fs)", step, time.Since(res.started).Seconds(), threshold.Seconds())
		if traceID != "" {
			note += ", trace " + traceID
		}
		r.progress.Note(note)
	}
	_, evaluated := m[runlog.KeyEvalGreedyAccuracy]
	alerted := hasPrefix(m, guard.KeyPrefix)
	if every := max(d.Cfg.Output.LogEvery, 1); step%every == 0 || skipErr != nil || evaluated || alerted || step == d.Cfg.Train.Steps {
		if err := r.dir.WriteTracedMetrics(step, m, traceID); err != nil {
			return err
		}
	}
	if stop != nil {
		return stop
	}
	if limit := d.Cfg.Train.MaxSkippedSteps; limit > 0 && r.skipped >= limit {
		return &stopError{Reason: ErrNoProgress, Step: int64(step), Run: r.dir.Path(),
			Cause: fmt.Sprintf("%d steps in a row skipped (train.max_skipped_steps), the last %s", r.skipped, clip(skipErr.Error()))}
	}
	if every := d.Cfg.Train.CheckpointEvery; every > 0 && step%every == 0 && step < d.Cfg.Train.Steps {
		_, span := d.Tracer.Start(res.ctx, spanSave)
		err := r.checkpoint(ctx, int64(step))
		endSpan(span, err)
		if err != nil {
			return err
		}
	}
	ps := runlog.StatsFromMetrics(step, d.Cfg.Train.Steps, m)
	if d.Cfg.MaxEnt.Objective != config.ObjectiveMaxEntListwise {
		ps.Tau = math.NaN() // tau only shapes the listwise weights: show "-"
	}
	r.progress.Update(ps, took)
	return nil
}

// watch shows step's metrics m to the guards (a trained step's only) and
// prints each alert they raise as one line, recording its level in m. It
// returns a *stopError when an alert says stop and train.guard is stop.
func (r *runner) watch(step int, m map[string]float64, trained bool) error {
	if r.guard == nil || !trained {
		return nil
	}
	var stop error
	for _, a := range r.guard.Observe(step, m) {
		m[a.Key()] = float64(a.Level)
		switch {
		case a.Level == guard.Stop && r.deps.Cfg.Train.Guard == config.GuardStop:
			if stop == nil {
				stop = &stopError{Reason: ErrNoProgress, Step: int64(step), Run: r.dir.Path(), Cause: a.Text, Guard: a.Rule}
			}
			r.progress.Note(fmt.Sprintf("stopping (%s) at step %d: %s", a.Rule, step, a.Text))
		case a.Level == guard.Stop:
			r.progress.Note(fmt.Sprintf("warning (%s) at step %d: %s (train.guard=stop would end the run here)", a.Rule, step, a.Text))
		default:
			r.progress.Note(fmt.Sprintf("warning (%s) at step %d: %s", a.Rule, step, a.Text))
		}
	}
	return stop
}

// hasPrefix reports whether m has a key starting with prefix.
func hasPrefix(m map[string]float64, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// stepAttrs are the root span's attributes of a trained step.
func stepAttrs(out *Outcome) []attribute.KeyValue {
	ro, rep := out.Scored.GetRollouts(), out.Report
	return []attribute.KeyValue{attrVersion.Int64(rep.GetMeta().GetPolicyVersion()), attrStaleness.Int64(rep.GetStalenessMax()),
		attrPrompts.Int(len(ro.GetPrompts())), attrSamples.Int(len(ro.GetRollouts())), attrTokens.Int64(rep.GetTokens())}
}

// batchTokens counts the prompt and completion tokens of a trained batch
// (train/num_tokens accumulates it, as the original's num_tokens).
func batchTokens(sc *messages.Scored) float64 {
	ro := sc.GetRollouts()
	prompts := ro.GetPrompts()
	n := 0
	for _, r := range ro.GetRollouts() {
		if i := int(r.GetPromptIndex()); i >= 0 && i < len(prompts) {
			n += len(prompts[i].GetTokenIds())
		}
		n += len(r.GetTokenIds())
	}
	return float64(n)
}

// stepMetrics are the metrics of a trained step: the learner's report,
// what Prepare derived, completion lengths and diversity, the controllers,
// stage timings and generation throughput; numTokens is train/num_tokens
// after this step.
func stepMetrics(d *Deps, n int64, out *Outcome, numTokens float64) map[string]float64 {
	rep, p, ro := out.Report, out.Prepared, out.Scored.GetRollouts()
	counts := make([]int, len(ro.GetRollouts()))
	tokens := make([][]int32, len(ro.GetRollouts()))
	for i, r := range ro.GetRollouts() {
		counts[i], tokens[i] = len(r.GetTokenIds()), r.GetTokenIds()
	}
	s := rewards.StepMetrics{
		Step: n + 1, LearningRate: rep.GetLearningRate(), GradNorm: rep.GetGradNorm(), NumTokens: numTokens,
		CompletionTokens: float64(rep.GetTokens()), Objective: d.Prepare.Objective,
		Loss: rewards.LossStats{Total: rep.GetLoss(), Policy: rep.GetPolicyLoss(), KL: rep.GetKl(), WeightedKL: rep.GetWeightedKl(),
			Clip: rep.GetListwiseClipLoss(), HasClip: d.Prepare.Objective == rewards.ObjectiveMaxEntListwise && d.Cfg.MaxEnt.ClipObjective},
		Learner: &rewards.LearnerStats{KL: rep.GetKl(), PolicyEntropy: rep.GetEntropy(),
			ClipLow: rep.GetClipLow(), ClipHigh: rep.GetClipHigh(), ClipRegion: rep.GetClipRegion(),
			ISWeightMean: rep.GetIsWeightMean(), ISTruncatedFrac: rep.GetIsTruncatedFrac(),
			PolicyVersion: rep.GetMeta().GetPolicyVersion(), StalenessMin: rep.GetStalenessMin(), StalenessMax: rep.GetStalenessMax()},
		Policy:     policyStats(rep.GetPolicyMetrics()),
		Prepared:   &p.Stats,
		Controller: controllerMetrics(d, out),
	}
	if l, err := rewards.CompletionLengths(counts, out.Scored.GetTruncated()); err == nil {
		s.Lengths = &l
	}
	if div, err := rewards.Diversity(tokens, int(ro.GetNumGenerations())); err == nil {
		s.Diversity = &div
	}
	m := s.Flatten()
	for stage, dt := range out.Timings {
		m[runlog.TimePrefix+stage+"_s"] = dt.Seconds()
	}
	if g := out.Timings["generate_reward"]; g > 0 {
		m[runlog.KeyTokensPerSec] = float64(rep.GetTokens()) / g.Seconds()
	}
	return m
}

// controllerMetrics are the controller block of a step: the settings, the
// state the controller sent after its update and the one the step was
// weighted with (for the deltas).
func controllerMetrics(d *Deps, out *Outcome) *rewards.ControllerMetrics {
	up, p := out.Update, out.Prepared
	return &rewards.ControllerMetrics{
		State: controllerState(up.GetState()), PrevTau: out.Control.GetTau(), PrevBeta: out.Control.GetBeta(),
		Tau: d.Tau, Beta: d.Beta, Meta: d.Meta, TauLRScale: 1,
		KL: out.Report.GetKl(), WeightEntropy: p.Stats.Weight.Mean,
		Grads:        rewards.ControllerGradients{Tau: up.GetTauGrad(), Beta: up.GetBetaGrad(), HasTau: up.GetHasTauGrad(), HasBeta: up.GetHasBetaGrad()},
		QTemperature: d.Prepare.QTemperature, QEpsilon: d.Prepare.QEpsilon, LenNormRef: d.Prepare.LengthNormalizeRef,
		Denominator: p.Stats.WeightDenominator,
	}
}

// checkpoint saves checkpoints/step-N: the policy (Hugging Face layout)
// and optimiser, written by the learner actor that owns them, the
// controller state as the controller last sent it, the weights the next
// batches are generated from in asynchronous mode (behaviour/), the
// effective configuration (config.yaml: a resume takes it from here), and
// trainer_state.json with the step's greedy accuracy when it was
// evaluated. It runs between steps and is not cut short by an interrupt:
// a checkpoint half written is no checkpoint. Older checkpoints are pruned
// to output.keep_checkpoints (plus the best).
func (r *runner) checkpoint(ctx context.Context, step int64) error {
	ctx = context.WithoutCancel(ctx)
	t := r.trainer
	control := t.Control()
	behaviour := t.Behaviour(step)
	cfg := *r.deps.Cfg
	cfg.Train.Resume = ""
	text, err := cfg.YAML()
	if err != nil {
		return err
	}
	st := runlog.TrainerState{Step: int(step), PolicyVersion: t.Policy().Version(), Seed: uint64(cfg.Train.Seed), Tokens: r.tokens}
	if r.evalStep == step {
		acc := r.evalAccuracy
		st.GreedyAccuracy = &acc
	}
	parts := []runlog.Part{
		{Name: "policy and optimiser", Write: func(dir string) error { return t.Checkpoint(ctx, dir) }},
		runlog.FilePart(rewards.ControllerStateFile, func(p string) error { return rewards.SaveControllerState(p, control) }),
		runlog.FilePart(runlog.ConfigFile, func(p string) error { return atomicfile.WriteBytes(p, text) }),
		{Name: BehaviourDir, Write: func(dir string) error {
			for s, w := range behaviour {
				if err := gpu.SaveCheckpoint(filepath.Join(dir, BehaviourDir, runlog.CheckpointName(int(s))), w, nil); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	if r.guard != nil {
		state, err := json.Marshal(r.guard)
		if err != nil {
			return err
		}
		parts = append(parts, runlog.FilePart(guard.StateFile, func(p string) error { return atomicfile.WriteBytes(p, state) }))
	}
	_, err = r.dir.SaveCheckpoint(st, cfg.Output.KeepCheckpoints, parts...)
	return err
}

// maxLineDetail is the longest error detail a progress or stop line
// repeats.
const maxLineDetail = 300

// clip returns s cut to maxLineDetail bytes (whole runes), marked "…".
func clip(s string) string {
	if len(s) <= maxLineDetail {
		return s
	}
	cut := maxLineDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// sampleRows are the first rows completions of the step's batch, with
// what Prepare derived for each: utility, advantage (SEED-scaled when
// enabled), q and weight (listwise only; otherwise the advantage).
func sampleRows(step int, out *Outcome, rows int) [][]any {
	sc, p := out.Scored, out.Prepared
	ro := sc.GetRollouts()
	k := int(ro.GetNumGenerations())
	r := len(sc.GetRewardNames())
	var data [][]any
	for i, c := range ro.GetRollouts() {
		if len(data) >= rows {
			break
		}
		g := i / k
		rank := 1
		for j := g * k; j < (g+1)*k; j++ {
			if p.Utilities[j] > p.Utilities[i] {
				rank++
			}
		}
		q, w := math.NaN(), p.Advantages[i]
		if p.Weights != nil {
			q, w = p.Q[i], p.Weights[i]
		}
		row := []any{step, g, i % k, k, rank, ro.GetPrompts()[g].GetText(), c.GetText(), p.Utilities[i],
			p.Advantages[i], q, w, math.Abs(w)}
		for j := range r {
			row = append(row, sc.GetRewards()[i*r+j])
		}
		data = append(data, append(row, c.GetGeneratorId()))
	}
	return data
}
