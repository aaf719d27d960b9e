package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/optim"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// ReferenceDir is where a run keeps its frozen reference model (the
// warm-started policy), inside the run directory.
const ReferenceDir = "reference"

// Run trains cfg's recipe end to end with every actor in this process
// (role all): the supervised warm start (skipped when model.checkpoint or
// train.resume gives the weights), then train.steps RL steps through the
// actor pipeline, writing runs/<name>/ (config.yaml, metrics.jsonl,
// samples/, checkpoints/, report.html) and a progress line to out. When
// ctx is cancelled (SIGINT) it finishes the step in flight, writes a final
// checkpoint and the report, and returns nil. A new run directory that
// ends (with an error or an interrupt) before its first metrics line or
// checkpoint is removed again, so the name can be reused; a resumed one
// is never removed.
func Run(ctx context.Context, cfg *config.Config, out io.Writer) (err error) {
	name := runName(cfg)
	d, err := NewDeps(cfg, name) // bad input stops the run before it writes anything
	if err != nil {
		return err
	}
	defer d.Device.Close()
	if err := preflight(d); err != nil {
		return err
	}
	dir, resume, discard, err := openRun(cfg, name)
	if err != nil {
		return err
	}
	interrupted := false
	defer func() {
		dir.Close()
		if (err != nil || interrupted) && discard != nil && !wroteAnything(dir) {
			if rmErr := discard(); rmErr == nil {
				fmt.Fprintf(out, "removed %s: the run ended before writing any step\n", dir.Path())
			}
		}
	}()
	d.RunID = dir.Name()
	fmt.Fprintf(out, "run %s\n", dir.Path())
	if d.Device.Name() != "cpu" {
		fmt.Fprintf(out, "learner on %s\n", d.Device.Info())
	}
	r := &runner{deps: d, dir: dir, out: out, progress: runlog.NewProgress(out, 10), warmAccuracy: math.NaN()}
	if err := r.loadModels(ctx, resume); err != nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted during the warm start: no checkpoint written")
		interrupted = true
		return nil
	}
	return r.train(ctx)
}

// wroteAnything reports whether the run has a metrics line or a complete
// checkpoint (or its checkpoints cannot be listed: keep it then).
func wroteAnything(dir *runlog.Dir) bool {
	steps, err := runlog.CompleteSteps(dir.CheckpointsPath())
	return dir.LastStep() >= 0 || len(steps) > 0 || err != nil
}

// runName is the run's name: output.name, the resumed run's directory, or
// task-preset-objective-time.
func runName(cfg *config.Config) string {
	switch {
	case cfg.Train.Resume != "":
		return filepath.Base(filepath.Clean(cfg.Train.Resume))
	case cfg.Output.Name != "":
		return cfg.Output.Name
	}
	return fmt.Sprintf("%s-%s-%s-%s", cfg.Task.Name, cfg.Model.Preset, cfg.MaxEnt.Objective, time.Now().UTC().Format("20060102-150405"))
}

// openRun creates the run directory, or opens the one to resume and
// returns its latest complete checkpoint ("" when starting fresh). A
// generated name already taken (two runs in one second) gets a -2, -3, …
// suffix; a name the user chose is never reused. For a directory it
// created, discard undoes the creation (see createRun); it is nil for a
// resumed run.
func openRun(cfg *config.Config, name string) (dir *runlog.Dir, ckpt string, discard func() error, err error) {
	if cfg.Train.Resume != "" {
		dir, ckpt, err := resumeRun(cfg.Train.Resume)
		return dir, ckpt, nil, err
	}
	dir, discard, err = createRun(cfg.Output.Dir, name)
	for n := 2; errors.Is(err, runlog.ErrRunExists) && cfg.Output.Name == "" && n <= 100; n++ {
		dir, discard, err = createRun(cfg.Output.Dir, fmt.Sprintf("%s-%d", name, n))
	}
	if err != nil {
		return nil, "", nil, err
	}
	if text, err := cfg.YAML(); err == nil {
		if err := dir.WriteConfig(text); err != nil {
			dir.Close()
			discard()
			return nil, "", nil, err
		}
	}
	return dir, "", discard, nil
}

// resumeRun opens the run directory path and prepares it to continue
// from its latest complete checkpoint.
func resumeRun(path string) (*runlog.Dir, string, error) {
	dir, err := runlog.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("resume: %w", err)
	}
	ckpt, st, err := dir.LatestCheckpoint()
	if err != nil {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w", path, err)
	}
	if err := dir.Resume(st.Step); err != nil {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w", path, err)
	}
	return dir, ckpt, nil
}

// createRun creates the run directory root/name and returns with it the
// function that undoes that: it removes the directory, or, when an empty
// directory of that name existed before, only what the run put in it.
func createRun(root, name string) (*runlog.Dir, func() error, error) {
	path := filepath.Join(root, name)
	dir, err := runlog.Create(root, name)
	if err != nil {
		return nil, nil, err
	}
	discard := func() error {
		if dir.Created() {
			return os.RemoveAll(path)
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	return dir, discard, nil
}

// runner is one run's state between the steps of Run.
type runner struct {
	deps     *Deps
	dir      *runlog.Dir
	out      io.Writer
	progress *runlog.Progress

	models    Models
	control   rewards.ControllerState // the starting state; the trainer's afterwards
	trainer   *Trainer
	firstStep int64
	tokens    float64 // cumulative prompt + completion tokens (train/num_tokens)

	warmAccuracy float64 // greedy accuracy after the warm start (NaN: not measured)
}

// loadModels builds the learner, reference and policy (startModels) and
// the RL learner over the policy with a fresh optimiser, or the resumed
// checkpoint's optimiser state.
func (r *runner) loadModels(ctx context.Context, resume string) error {
	d := r.deps
	r.control = rewards.NewControllerState(d.Cfg.MaxEnt.Tau, d.Cfg.MaxEnt.Beta, d.Meta)
	policy, ref, err := r.startModels(ctx, resume)
	if err != nil {
		return err
	}
	l, err := gpu.NewLearner(policy, learnerConfig(d))
	if err != nil {
		return err
	}
	if resume != "" {
		if err := l.LoadOptimizer(resume); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		fmt.Fprintf(r.out, "resumed from %s at step %d\n", resume, r.firstStep)
	}
	r.models = Models{Learner: l, Reference: ref, Policy: policy}
	return nil
}

// startModels returns the RL start and the reference: those of the
// checkpoint being resumed (with its step and controller state), the
// model.checkpoint (both), or the warm start from random weights (both,
// saved as the run's reference).
func (r *runner) startModels(ctx context.Context, resume string) (policy, ref *gpu.Model, err error) {
	d := r.deps
	switch {
	case resume != "":
		return r.resumeModels(resume)
	case d.Cfg.Model.Checkpoint != "":
		loaded, err := gpu.LoadModel(d.Cfg.Model.Checkpoint)
		if err != nil {
			return nil, nil, err
		}
		if policy, err = gpu.NewModelFromWeights(loaded.Config(), loaded.Weights(), 0); err != nil {
			return nil, nil, err
		}
		if d.Cfg.Train.WarmStartFromCheckpoint && d.Cfg.Train.WarmStartSteps > 0 {
			if policy, err = r.warmStart(ctx, policy); err != nil {
				return nil, nil, err
			}
		}
	default:
		if policy, err = r.warmStart(ctx, nil); err != nil {
			return nil, nil, err
		}
	}
	return policy, policy, gpu.SaveCheckpoint(filepath.Join(r.dir.Path(), ReferenceDir), policy, d.Tokenizer)
}

// resumeModels loads the run's reference and the checkpoint's policy,
// step and controller state.
func (r *runner) resumeModels(ckpt string) (policy, ref *gpu.Model, err error) {
	if ref, err = gpu.LoadModel(filepath.Join(r.dir.Path(), ReferenceDir)); err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	if policy, err = gpu.LoadModel(ckpt); err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	st, err := runlog.LoadTrainerState(ckpt)
	if err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	r.firstStep, r.tokens = int64(st.Step), st.Tokens
	if r.control, err = rewards.LoadControllerState(filepath.Join(ckpt, runlog.ControllerStateFile)); err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	return policy, ref, nil
}

// The warm start stops early once greedy accuracy reaches warmStartTarget
// at two consecutive checks (every warmStartCheckEvery steps): DESIGN §4
// trains it "until greedy accuracy is ~20–50%". On the small preset the
// supervised model learns addition's carry in a jump, around which single
// checks swing by ±15 points and whose step moves with float rounding
// (tests/learning_test.go: at lr 2e-3 it passed 40% twice by step 675 and
// GRPO then gained 27–36 points). train.warm_start_steps is the cap.
const (
	warmStartTarget     = 0.40
	warmStartCheckEvery = 50
)

// warmStart runs the supervised warm start from m (random weights when
// nil), printing its progress and the greedy accuracy it reaches.
func (r *runner) warmStart(ctx context.Context, m *gpu.Model) (*gpu.Model, error) {
	d := r.deps
	if m == nil {
		var err error
		if m, err = gpu.NewModel(d.Model, uint64(d.Cfg.Model.Seed)); err != nil {
			return nil, err
		}
	}
	n := d.Cfg.Train.WarmStartSteps
	start := time.Now()
	steps, above := n, 0 // above: consecutive checks at or over the target
	warm, err := WarmStart(ctx, d, m, func(step int, st gpu.StepStats, policy func() *gpu.Model) bool {
		steps = step
		show := step%max(n/10, 1) == 0 && step < n
		if !show && step%warmStartCheckEvery != 0 {
			return false
		}
		acc, err := r.evaluate(ctx, policy())
		if err != nil {
			return false
		}
		if show {
			fmt.Fprintf(r.out, "warm start %d/%d | loss %.4f | greedy accuracy %.1f%% | %.0fs\n", step, n, st.Loss, 100*acc, time.Since(start).Seconds())
		}
		if step%warmStartCheckEvery == 0 {
			above = map[bool]int{true: above + 1, false: 0}[acc >= warmStartTarget]
		}
		return above >= 2
	})
	if err != nil {
		return nil, err
	}
	if acc, err := r.evaluate(ctx, warm); err == nil {
		r.warmAccuracy = acc
		fmt.Fprintf(r.out, "warm start done (%d steps, %.0fs): greedy accuracy %.1f%%\n", steps, time.Since(start).Seconds(), 100*acc)
	}
	return warm, nil
}

// learnerConfig is the RL optimiser: a fresh AdamW at optim.lr on the
// run's device.
func learnerConfig(d *Deps) gpu.LearnerConfig {
	o := d.Cfg.Optim
	return gpu.LearnerConfig{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay,
		MaxGradNorm: o.GradClip, Device: d.Device, Schedule: schedule(o, d.Cfg.Train.Steps)}
}

// schedule is optim.schedule over the run's train.steps: constant (with a
// linear warm-up when optim.warmup_steps > 0), or a cosine or linear decay
// to 0 at the last step after the warm-up.
func schedule(o config.Optim, steps int) optim.Schedule {
	s := optim.Schedule{Kind: optim.Constant, Warmup: o.WarmupSteps, Total: steps, Base: o.LR}
	switch {
	case o.Schedule == config.ScheduleCosine:
		s.Kind = optim.Cosine
	case o.Schedule == config.ScheduleLinear:
		s.Kind = optim.LinearDecay
	case o.WarmupSteps > 0:
		s.Kind = optim.LinearWarmup
	}
	return s
}

// evaluate is the greedy accuracy on train.eval_prompts held-out problems
// (from the data set's held-out rows when it has them).
func (r *runner) evaluate(ctx context.Context, m *gpu.Model) (float64, error) {
	d := r.deps
	s := evaluate.ModelSampler{Model: m, Tokenizer: d.Tokenizer, Prompter: d.Prompter, MaxNewTokens: d.Cfg.Generation.MaxCompletionLen}
	res, err := evaluate.Run(ctx, s, d.EvalTask, evaluate.Options{N: max(d.Cfg.Train.EvalPrompts, 1), K: 1, GreedyOnly: true,
		Temperature: d.Cfg.Generation.Temperature, Seed: uint64(d.Cfg.Train.Seed)})
	return res.GreedyAccuracy, err
}

// batchOrSkip is a produced batch, or why step n has none.
type batchOrSkip struct {
	n     int64
	batch *produced
	err   error
}

// train runs the RL steps through the pipeline, recording each, then
// writes the final checkpoint and the report.
func (r *runner) train(ctx context.Context) error {
	d := r.deps
	p := StartPipeline(d, r.models, r.control, pipelineOptionsOf(d), os.Stderr)
	defer p.Stop()
	r.trainer = p.Trainer
	ahead := batchesAhead(d.Cfg.Train.MaxStaleness, d.Cfg.Train.SyncEvery)
	last, err := drive(ctx, p.Trainer, r.firstStep, int64(d.Cfg.Train.Steps), ahead, r.record)
	if err != nil {
		return err
	}
	r.progress.Done()
	if err := r.checkpoint(last); err != nil {
		return err
	}
	if err := r.dir.WriteReport(); err != nil {
		return err
	}
	if acc, err := r.evaluate(ctx, r.models.Learner.Snapshot()); err == nil {
		from := ""
		if !math.IsNaN(r.warmAccuracy) {
			from = fmt.Sprintf(" (warm start %.1f%%)", 100*r.warmAccuracy)
		}
		fmt.Fprintf(r.out, "greedy accuracy %.1f%%%s on %d held-out problems\n", 100*acc, from, max(r.deps.Cfg.Train.EvalPrompts, 1))
	}
	fmt.Fprintf(r.out, "done: %d steps, outputs in %s\n", last, r.dir.Path())
	return nil
}

// batchesAhead is how many batches may be produced and not yet consumed
// so that no sample is more than maxStaleness policy versions behind the
// learner when it is consumed: each batch ahead costs one version, and
// weights that reach the generators only every syncEvery steps cost up to
// syncEvery − 1 more. config refuses syncEvery > maxStaleness + 1 in
// asynchronous mode; synchronous mode (0) publishes every step.
func batchesAhead(maxStaleness, syncEvery int) int {
	if maxStaleness == 0 {
		return 1
	}
	return max(maxStaleness+1-(max(syncEvery, 1)-1), 1)
}

// drive runs steps first..steps-1 of t: a producer goroutine makes
// batches while fewer than ahead are waiting to be consumed (1: each batch
// waits for the previous step's weights, which is synchronous and
// deterministic; see batchesAhead) and this goroutine consumes them in
// order, calling record after each step with its outcome or skip and the
// wall time since the previous step. When ctx is cancelled it starts no
// new batch and stops: a batch still being made is dropped at its next
// stage (nothing was learned from it), while a batch the learner has
// started on is finished and recorded (consume runs on a context that is
// not cancelled, under the stages' own timeouts). It returns the number of
// steps done (counting from 0) or record's error; every step counted is
// one the learner took or one recorded as skipped.
func drive(ctx context.Context, t *Trainer, first, steps int64, ahead int,
	record func(ctx context.Context, n int64, out *Outcome, err error, took time.Duration) error) (int64, error) {
	slots := make(chan struct{}, ahead) // batches produced and not yet consumed
	batches := make(chan batchOrSkip, ahead)
	learning := context.WithoutCancel(ctx) // a step half learned would be lost: finish it
	var stopped atomic.Bool
	go func() {
		defer close(batches)
		for n := first; n < steps; n++ {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if ctx.Err() != nil || stopped.Load() {
				return
			}
			b, err := t.produce(ctx, n)
			batches <- batchOrSkip{n: n, batch: b, err: err}
		}
	}()
	defer func() { // let the producer finish its batch in flight and exit
		stopped.Store(true)
		for range batches {
			select {
			case <-slots:
			default:
			}
		}
	}()
	last, prev := first, time.Now()
	for item := range batches {
		if item.err != nil && ctx.Err() != nil && errors.Is(item.err, ctx.Err()) {
			break // interrupted while its batch was made: the step was not taken
		}
		var out *Outcome
		err := item.err
		if err == nil {
			out, err = t.consume(learning, item.batch)
		}
		<-slots
		now := time.Now()
		if err := record(ctx, item.n, out, err, now.Sub(prev)); err != nil {
			return last, err
		}
		last, prev = item.n+1, now
		if ctx.Err() != nil {
			break
		}
	}
	return last, nil
}

// record writes step n's metrics (every output.log_every steps, and every
// skipped, evaluated or last step), sample table, evaluation, checkpoint
// and progress line. A skipped step (err a *SkipError) is recorded with
// its reason; any other error ends the run.
func (r *runner) record(ctx context.Context, n int64, out *Outcome, err error, took time.Duration) error {
	d := r.deps
	step := int(n + 1)
	var skipErr *SkipError
	if err != nil && !errors.As(err, &skipErr) {
		return fmt.Errorf("step %d: %w", step, err)
	}
	m := map[string]float64{"time/step_s": took.Seconds()}
	if skipErr != nil {
		m["train/skipped"], m["train/skip_stage"], m["train/skip_reason"] = 1, float64(skipErr.Stage), float64(skipErr.Reason)
		fmt.Fprintf(r.out, "step %d skipped: %v\n", step, skipErr)
	} else {
		r.tokens += batchTokens(out.Scored)
		maps.Copy(m, stepMetrics(n, out))
		m["train/num_tokens"] = r.tokens
		if every := d.Cfg.Output.SampleEvery; every > 0 && step%every == 0 {
			if err := r.dir.WriteSamples(step, sampleColumns(out.Scored), sampleRows(step, out, d.Cfg.Output.SampleRows)); err != nil {
				return err
			}
		}
	}
	if every := d.Cfg.Train.EvalEvery; every > 0 && step%every == 0 {
		if acc, err := r.evaluate(ctx, r.models.Learner.Snapshot()); err == nil {
			m["eval/greedy_accuracy"] = acc
		}
	}
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k)
		}
	}
	_, evaluated := m["eval/greedy_accuracy"]
	if every := max(d.Cfg.Output.LogEvery, 1); step%every == 0 || skipErr != nil || evaluated || step == d.Cfg.Train.Steps {
		if err := r.dir.WriteMetrics(step, m); err != nil {
			return err
		}
	}
	if every := d.Cfg.Train.CheckpointEvery; every > 0 && step%every == 0 && step < d.Cfg.Train.Steps {
		if err := r.checkpoint(int64(step)); err != nil {
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
// the reward-side statistics, stage timings and generation throughput.
func stepMetrics(n int64, out *Outcome) map[string]float64 {
	rep := out.Report
	m := (rewards.StepMetrics{Step: n + 1, Prepared: out.Prepared}).Flatten()
	maps.Copy(m, rep.GetMetrics())
	m[runlog.KeyAccuracy], m[runlog.KeyTau], m[runlog.KeyBeta] = rep.GetAccuracy(), rep.GetTau(), rep.GetBeta()
	m[runlog.KeyKL], m[runlog.KeyEntropy], m[runlog.KeyWeightEntropy] = rep.GetKl(), rep.GetEntropy(), rep.GetWeightEntropy()
	for stage, dt := range out.Timings {
		m[runlog.TimePrefix+stage+"_s"] = dt.Seconds()
	}
	if g := out.Timings["generate_reward"]; g > 0 {
		m[runlog.KeyTokensPerSec] = float64(rep.GetTokens()) / g.Seconds()
	}
	return m
}

// checkpoint saves checkpoints/step-N: the policy (HF layout), the
// optimiser, controller_state.json and trainer_state.json. It reads the
// learner between steps, when the learner actor is idle.
func (r *runner) checkpoint(step int64) error {
	l := r.models.Learner
	control := r.trainer.Control()
	st := runlog.TrainerState{Step: int(step), PolicyVersion: l.Version(), DataCursor: step, Seed: uint64(r.deps.Cfg.Train.Seed),
		Tokens: r.tokens}
	_, err := r.dir.SaveCheckpoint(st, 0,
		runlog.Part{Name: "model", Write: func(dir string) error { return gpu.SaveCheckpoint(dir, l.Snapshot(), r.deps.Tokenizer) }},
		runlog.Part{Name: "optimizer", Write: l.SaveOptimizer},
		runlog.FilePart(runlog.ControllerStateFile, func(p string) error { return rewards.SaveControllerState(p, control) }),
	)
	return err
}

// sampleColumns are the sample-table columns (the original's).
func sampleColumns(sc *messages.Scored) []string {
	return runlog.StandardSampleColumns(sc.GetRewardNames())
}

// sampleRows are the first rows completions of the step's batch.
func sampleRows(step int, out *Outcome, rows int) [][]any {
	sc := out.Scored
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
			if sc.GetUtilities()[j] > sc.GetUtilities()[i] {
				rank++
			}
		}
		q := math.NaN()
		if len(sc.GetQ()) > 0 {
			q = sc.GetQ()[i]
		}
		w := sc.GetAdvantages()[i]
		if len(out.Weights) > 0 {
			w = out.Weights[i]
		}
		row := []any{step, g, i % k, k, rank, ro.GetPrompts()[g].GetText(), c.GetText(), sc.GetUtilities()[i],
			sc.GetAdvantages()[i], q, w, math.Abs(w)}
		for j := range r {
			row = append(row, sc.GetRewards()[i*r+j])
		}
		data = append(data, row)
	}
	return data
}
