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

// cadence says which outputs a step writes: its metrics line every log
// steps (output.log_every; and every skipped, evaluated, alerted or last
// step), its sample table every samples steps (output.sample_every), an
// evaluation every eval steps and at the last step (train.eval_every: the
// final accuracy is then in the metrics like every other, and the final
// evaluation is that step's) and a checkpoint every checkpoint steps
// before the last (train.checkpoint_every; the run checkpoints its last
// step itself). 0 turns an output off.
type cadence struct {
	log, samples, eval, checkpoint int
	steps                          int // train.steps: the last step
}

// every reports whether step is one of every n (n = 0: none).
func every(n, step int) bool { return n > 0 && step%n == 0 }

// due are the outputs of one step.
type due struct{ metrics, samples, eval, checkpoint bool }

// at is what step (1-based) writes by the clock alone.
func (c cadence) at(step int) due {
	last := step == c.steps
	return due{metrics: every(c.log, step) || last, samples: every(c.samples, step), eval: every(c.eval, step) || (last && c.eval > 0),
		checkpoint: every(c.checkpoint, step) && !last}
}

// record writes what step n leaves behind, in this order: its metrics
// (or its skip), sample table, evaluation, the guards' verdict, its
// metrics line, then, unless the run stops here, its checkpoint and
// progress line. A skipped step (err a *SkipError) is recorded with its
// reason; any other error ends the run, and so does the
// train.max_skipped_steps-th skipped step in a row or a guard that says
// stop (a *stopError, once the metrics line is written).
func (r *runner) record(ctx context.Context, res stepResult) error {
	var skipped *SkipError
	if res.err != nil && !errors.As(res.err, &skipped) {
		return fmt.Errorf("step %d: %w", res.n+1, res.err)
	}
	step, due := int(res.n+1), r.settings.record.cadence.at(int(res.n+1))
	m := r.stepRecord(res, skipped)
	if due.samples && skipped == nil {
		if err := r.writeSamples(step, res.out); err != nil {
			return err
		}
	}
	if due.eval {
		r.evaluateStep(ctx, res, m)
	}
	r.clusterMetrics(ctx, m)
	dropNonFinite(m)
	stop := r.watch(step, m, skipped == nil)
	r.env.tel.meter.Step(step, skipped != nil, m)
	r.markSlow(res, step)
	_, evaluated := m[runlog.KeyEvalGreedyAccuracy]
	if due.metrics || skipped != nil || evaluated || hasPrefix(m, guard.KeyPrefix) {
		if err := r.dir.WriteTracedMetrics(step, m, trace.TraceID(res.ctx)); err != nil {
			return err
		}
	}
	if stop != nil {
		return stop
	}
	if err := r.tooManySkips(step, skipped); err != nil {
		return err
	}
	if due.checkpoint {
		if err := r.checkpointStep(ctx, res, step); err != nil {
			return err
		}
	}
	r.showProgress(step, m, res.took)
	return nil
}

// stepRecord is the metrics of step res: its wall time, and the learner's
// and rewards' numbers (stepMetrics) or why it was skipped. It counts the
// skips in a row and the tokens trained on.
func (r *runner) stepRecord(res stepResult, skipped *SkipError) map[string]float64 {
	m := map[string]float64{runlog.KeyStepTime: res.took.Seconds()}
	if skipped != nil {
		r.skipped++
		r.skips.add(skipped)
		m[keySkipped], m[keySkipStage], m[keySkipReason] = 1, float64(skipped.Stage), float64(skipped.Reason)
		r.progress.Note(fmt.Sprintf("step %d skipped: %s%s", res.n+1, clip(skipped.Error()), r.skipHint(skipped)))
		return m
	}
	r.skipped = 0
	oteltrace.SpanFromContext(res.ctx).SetAttributes(stepAttrs(res.out)...)
	r.tokens += batchTokens(res.out.Scored)
	maps.Copy(m, stepMetrics(r.settings.record.metrics, res.n, res.out, r.tokens))
	return m
}

// skipHint is what a skip's line adds: for a stage that timed out, the
// time its part waited and the setting that bounds it; for one refused
// memory (gpu.ErrMemory, whose text a notice from an actor keeps), the
// settings that lower it.
func (r *runner) skipHint(s *SkipError) string {
	switch {
	case s.Reason == messages.SkipReason_TIMEOUT:
		timeout, whose := r.settings.record.timeouts[s.Stage], "its timeout"
		if s.Waited > timeout { // relayed on: the timeouts of every stage on its way
			timeout, whose = s.Waited, "the timeouts of the stages it went through"
		}
		return fmt.Sprintf(" (no answer within %s, %s: set cluster.request_timeout above what a request takes)", whose, timeout)
	case s.Err != nil && strings.Contains(s.Err.Error(), gpu.ErrMemory.Error()):
		return " (train.micro_batch, train.prompts_per_step or generation.max_completion_len lowers the memory a step needs)"
	}
	return ""
}

// writeSamples writes step's sample table: its first output.sample_rows
// completions with what Prepare derived for each.
func (r *runner) writeSamples(step int, out *Outcome) error {
	cols := runlog.StandardSampleColumns(out.Scored.GetRewardNames())
	return r.dir.WriteSamples(step, cols, sampleRows(step, out, r.settings.record.sampleRows), highKLTables(r.settings.tokenizer, out)...)
}

// evaluateStep adds the policy's greedy accuracy after the step to m, and
// keeps it for the step's checkpoint.
func (r *runner) evaluateStep(ctx context.Context, res stepResult, m map[string]float64) {
	_, span := r.env.tel.tracer.Start(res.ctx, spanEvaluate)
	ev, err := r.evaluation(ctx, r.trainer.Policy())
	endSpan(span, err)
	if err == nil {
		m[runlog.KeyEvalGreedyAccuracy] = ev.GreedyAccuracy
		r.evalStep, r.evalAccuracy, r.evalN = res.n+1, ev.GreedyAccuracy, ev.N
	}
}

// clusterMetrics adds the parts sent again because their actor was lost,
// those hedged on a second node and the malformed answers, and the newest
// weight sync to remote generators, which replaces the hand-over time (a
// network's, not a pointer's).
func (r *runner) clusterMetrics(ctx context.Context, m map[string]float64) {
	st := r.trainer.ClusterStats(ctx)
	if st.Reissued > 0 {
		m[runlog.KeyReissuedParts] = float64(st.Reissued)
	}
	if st.Hedged > 0 {
		m[runlog.KeyHedgedParts] = float64(st.Hedged)
	}
	if st.BadAnswers > 0 {
		m[runlog.KeyBadAnswers] = float64(st.BadAnswers)
	}
	if sync := st.Sync; sync.Bytes > 0 {
		m[runlog.KeyWeightSyncBytes], m[runlog.TimePrefix+"weight_sync_s"] = float64(sync.Bytes), sync.Seconds
	}
}

// dropNonFinite removes the metrics that are NaN or ±Inf: a metrics line
// holds numbers only.
func dropNonFinite(m map[string]float64) {
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k)
		}
	}
}

// markSlow marks a step slower than trace.slow_step in its trace and on
// the progress output, with its trace id.
func (r *runner) markSlow(res stepResult, step int) {
	took := time.Since(res.started)
	slow, threshold := r.slow.observe(took)
	if !slow {
		return
	}
	oteltrace.SpanFromContext(res.ctx).SetAttributes(attrSlow.Bool(true))
	note := fmt.Sprintf("step %d slow: %.2fs (threshold %.2fs)", step, took.Seconds(), threshold.Seconds())
	if id := trace.TraceID(res.ctx); id != "" {
		note += ", trace " + id
	}
	r.progress.Note(note)
}

// tooManySkips stops the run at its train.max_skipped_steps-th skipped
// step in a row.
func (r *runner) tooManySkips(step int, skipped *SkipError) error {
	if limit := r.settings.record.maxSkipped; limit > 0 && r.skipped >= limit {
		return &stopError{Reason: ErrNoProgress, Step: int64(step), Run: r.dir.Path(),
			Cause: fmt.Sprintf("%d steps in a row skipped (train.max_skipped_steps), the last %s", r.skipped, clip(skipped.Error()))}
	}
	return nil
}

// checkpointStep writes step's checkpoint, traced in the step's trace.
func (r *runner) checkpointStep(ctx context.Context, res stepResult, step int) error {
	_, span := r.env.tel.tracer.Start(res.ctx, spanSave)
	err := r.checkpoint(ctx, int64(step))
	endSpan(span, err)
	return err
}

// showProgress updates the progress line with step's metrics.
func (r *runner) showProgress(step int, m map[string]float64, took time.Duration) {
	ps := runlog.StatsFromMetrics(step, r.settings.record.cadence.steps, m)
	if !r.settings.record.showsTau {
		ps.Tau = math.NaN() // tau only shapes the listwise weights: show "-"
	}
	r.progress.Update(ps, took)
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
		case a.Level == guard.Stop && r.settings.record.guardStops:
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
func stepMetrics(ms metricSettings, n int64, out *Outcome, numTokens float64) map[string]float64 {
	rep, p, ro := out.Report, out.Prepared, out.Scored.GetRollouts()
	counts := make([]int, len(ro.GetRollouts()))
	tokens := make([][]int32, len(ro.GetRollouts()))
	for i, r := range ro.GetRollouts() {
		counts[i], tokens[i] = len(r.GetTokenIds()), r.GetTokenIds()
	}
	s := rewards.StepMetrics{
		Step: n + 1, LearningRate: rep.GetLearningRate(), GradNorm: rep.GetGradNorm(), NumTokens: numTokens,
		CompletionTokens: float64(rep.GetTokens()), Objective: ms.objective,
		Loss: rewards.LossStats{Total: rep.GetLoss(), Policy: rep.GetPolicyLoss(), KL: rep.GetKl(), WeightedKL: rep.GetWeightedKl(),
			Clip: rep.GetListwiseClipLoss(), HasClip: ms.objective == rewards.ObjectiveMaxEntListwise && ms.clip},
		Learner: &rewards.LearnerStats{KL: rep.GetKl(), PolicyEntropy: rep.GetEntropy(),
			ClipLow: rep.GetClipLow(), ClipHigh: rep.GetClipHigh(), ClipRegion: rep.GetClipRegion(),
			ISWeightMean: rep.GetIsWeightMean(), ISTruncatedFrac: rep.GetIsTruncatedFrac(),
			PolicyVersion: rep.GetMeta().GetPolicyVersion(), StalenessMin: rep.GetStalenessMin(), StalenessMax: rep.GetStalenessMax()},
		Policy:     policyStats(rep.GetPolicyMetrics()),
		Prepared:   &p.Stats,
		Controller: controllerMetrics(ms, out),
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
func controllerMetrics(ms metricSettings, out *Outcome) *rewards.ControllerMetrics {
	up, p, c := out.Update, out.Prepared, ms.control
	return &rewards.ControllerMetrics{
		State: controllerState(up.GetState()), PrevTau: out.Control.GetTau(), PrevBeta: out.Control.GetBeta(),
		Tau: c.Tau, Beta: c.Beta, Meta: c.Meta, TauLRScale: 1,
		KL: out.Report.GetKl(), WeightEntropy: p.Stats.Weight.Mean,
		Grads:        rewards.ControllerGradients{Tau: up.GetTauGrad(), Beta: up.GetBetaGrad(), HasTau: up.GetHasTauGrad(), HasBeta: up.GetHasBetaGrad()},
		QTemperature: ms.prepare.QTemperature, QEpsilon: ms.prepare.QEpsilon, LenNormRef: ms.prepare.LengthNormalizeRef,
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
	t, rs := r.trainer, r.settings.record
	control := t.Control()
	behaviour := t.Behaviour(step)
	st := runlog.TrainerState{Step: int(step), PolicyVersion: t.Policy().Version(), Seed: uint64(rs.seed), Tokens: r.tokens}
	if r.evalStep == step {
		acc := r.evalAccuracy
		st.GreedyAccuracy = &acc
	}
	parts := []runlog.Part{
		{Name: "policy and optimiser", Write: func(dir string) error { return t.Checkpoint(ctx, dir) }},
		runlog.FilePart(rewards.ControllerStateFile, func(p string) error { return rewards.SaveControllerState(p, control) }),
		runlog.FilePart(runlog.ConfigFile, func(p string) error { return atomicfile.WriteBytes(p, rs.config) }),
		{Name: BehaviourDir, Write: func(dir string) error { return saveBehaviour(dir, behaviour) }},
	}
	if r.guard != nil {
		state, err := json.Marshal(r.guard)
		if err != nil {
			return err
		}
		parts = append(parts, runlog.FilePart(guard.StateFile, func(p string) error { return atomicfile.WriteBytes(p, state) }))
	}
	_, err := r.dir.SaveCheckpoint(st, rs.keep, parts...)
	return err
}

// saveBehaviour writes the weights batches after a checkpoint are
// generated from, as behaviour/step-N model directories of dir.
func saveBehaviour(dir string, behaviour map[int64]*gpu.Model) error {
	for s, w := range behaviour {
		if err := gpu.SaveCheckpoint(filepath.Join(dir, BehaviourDir, runlog.CheckpointName(int(s))), w, nil); err != nil {
			return err
		}
	}
	return nil
}

// maxLineDetail is the longest error detail a progress or stop line
// repeats.
const maxLineDetail = 300

// clip returns s cut to maxLineDetail bytes (whole runes), marked "…".
func clip(s string) string { return clipTo(s, maxLineDetail) }

// clipTo returns s cut to n bytes (whole runes), marked "…".
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
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
