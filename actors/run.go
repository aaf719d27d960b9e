package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/rewards"
	"go.opentelemetry.io/otel/metric"
)

// ReferenceDir is where a run keeps its frozen reference model (the
// warm-started policy), inside the run directory.
const ReferenceDir = runlog.ReferenceDir

// BehaviourDir is where a checkpoint keeps the weights that the batches
// after it are generated from in asynchronous mode (Trainer.Behaviour),
// one step-N model directory each.
const BehaviourDir = "behaviour"

// Why a run stopped before its last step (stopError.Reason).
var (
	// ErrInterrupted: the run was cancelled (SIGINT, SIGTERM, SIGHUP).
	ErrInterrupted = errors.New("actors: run interrupted")
	// ErrNoProgress: train.max_skipped_steps steps in a row were skipped,
	// or a guard (train.guard=stop) found the run cannot learn.
	ErrNoProgress = errors.New("actors: run makes no progress")
)

// stopError is a run that stopped before its last step, with a
// checkpoint to resume from (Step ≥ 0) or, interrupted during the warm
// start, with nothing saved (Step < 0). Its message is the one line a
// user needs: where it stopped, why, and the command that resumes it.
type stopError struct {
	Reason error  // ErrInterrupted or ErrNoProgress
	Step   int64  // the step of the checkpoint written; < 0: none
	Run    string // the run directory
	Cause  string // ErrNoProgress: the skips or the guard alert that stopped it
	Guard  string // the rule of the guard that stopped it ("" for none)
	Final  bool   // interrupted during the final evaluation of its last step
}

// Error implements error.
func (e *stopError) Error() string {
	switch {
	case e.Step < 0:
		return "interrupted during the warm start: nothing saved"
	case e.Guard != "":
		return fmt.Sprintf("stopped at step %d by the %s guard: %s; checkpoint step-%d and the report are in %s",
			e.Step, e.Guard, e.Cause, e.Step, e.Run)
	case errors.Is(e.Reason, ErrNoProgress):
		return fmt.Sprintf("stopped at step %d: %s; checkpoint step-%d holds the last good state; fix the cause, then resume with: mgrpo-node --resume %s",
			e.Step, e.Cause, e.Step, e.Run)
	case e.Final:
		return fmt.Sprintf("stopped at step %d, the last, during its final evaluation; run the evaluation with: mgrpo-node --resume %s", e.Step, e.Run)
	}
	return fmt.Sprintf("stopped at step %d; resume with: mgrpo-node --resume %s", e.Step, e.Run)
}

// Unwrap returns the reason.
func (e *stopError) Unwrap() error { return e.Reason }

// Run trains cfg's recipe end to end with every actor in this process
// (role all): the supervised warm start (skipped when model.checkpoint or
// train.resume gives the weights), then train.steps RL steps through the
// actor pipeline, writing runs/<name>/ (config.yaml, metrics.jsonl,
// samples/, checkpoints/, report.html) and a progress line to out. When
// ctx is cancelled (SIGINT) it finishes the step in flight, writes a final
// checkpoint and the report, and returns an error wrapping ErrInterrupted
// whose message names the step and the command that resumes it;
// train.max_skipped_steps skipped steps in a row end it the same way
// (ErrNoProgress). A new run directory that ends (with an error or an
// interrupt) before its first metrics line or checkpoint is removed again,
// so the name can be reused; a resumed one is never removed. A run that
// ends records its final evaluation (runlog.FinalEvalFile); resumed at
// that step again, it runs and writes nothing and says in one line that
// it is done. Resumed at its last step without that record (killed during
// the final evaluation), it runs the evaluation alone.
//
// Run is the wiring: it resolves cfg once into the run's settings
// (newSettings) and owns what the run opens (the device, the tracer and
// metrics, a learner node's ports, the run directory), closing each when
// the run ends; nothing it starts reads cfg.
func Run(ctx context.Context, cfg *config.Config, out io.Writer) (err error) {
	s, err := newSettings(cfg) // bad input stops the run before it writes anything
	if err != nil {
		return err
	}
	if line, ok := finished(cfg, s); ok { // before anything is opened, started or written
		fmt.Fprintln(out, line)
		return nil
	}
	plan, err := preflight(cfg, s)
	if err != nil {
		return err
	}
	memoryLine, restoreLimit := setMemoryLimit(plan, os.Getenv(goMemoryLimitEnv))
	defer restoreLimit()
	dev, err := openDevice(cfg.Model)
	if err != nil {
		return err
	}
	defer dev.Close()
	id, roles := newNodeID(cfg.Cluster.Roles()[0]), cfg.Cluster.Roles()
	tp, err := newTracing(ctx, cfg.Trace, id, roles, out)
	if err != nil {
		return err
	}
	defer tp.Shutdown(context.WithoutCancel(ctx)) // spans of an interrupted run too
	mp, err := newMetrics(ctx, cfg, id, roles, out)
	if err != nil {
		return err
	}
	defer mp.Shutdown(context.WithoutCancel(ctx))
	ln, err := startLearnerNode(cfg, s, mp.MeterProvider()) // its ports are taken now, not after a warm start
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Stop()
	}
	dir, resume, discard, err := openRun(cfg, runName(cfg), s.record.config, out)
	if err != nil {
		return err
	}
	defer func() { closeRun(dir, discard, err, out) }()
	fmt.Fprintf(out, "run %s\n%s\n", dir.Path(), memoryLine)
	env := runEnv{id: dir.Name(), tel: telemetry{tracer: tp.Tracer(), node: tp.node, meter: mp.Instruments()},
		device: dev, metrics: mp.MeterProvider()}
	return runIn(ctx, cfg, s, env, dir, ln, resume, out)
}

// runIn runs the steps of a run whose directory, node and telemetry Run
// opened: it serves the run's page, loads or makes the models and trains.
func runIn(ctx context.Context, cfg *config.Config, s *settings, env runEnv, dir *runlog.Dir, ln *node.Node, resume string, out io.Writer) error {
	stopPage, err := servePage(cfg.Output.Serve, dir, out)
	if err != nil {
		return err
	}
	defer stopPage()
	if env.device.Name() != "cpu" {
		fmt.Fprintf(out, "models on %s\n", env.device.Info()) // the learner, the generators and the reference scorer
	}
	if ln != nil {
		at := "actors at " + ln.Address()
		if b := ln.BlobServer(); b != nil {
			at += ", weights at " + b.Addr()
		}
		fmt.Fprintf(out, "learner node: worker nodes join with --cluster.seeds %s (%s)\n", ln.Seed(), at)
		if cl := cfg.Cluster; !loopbackHost(cl.Host) && cl.Insecure {
			fmt.Fprintf(out, "warning: cluster.insecure: nodes talk in plaintext on %s; anyone who can reach it can join the run\n", cl.Host)
		}
	}
	progress := runlog.NewProgress(out, 10)
	r := &runner{settings: s, env: env, dir: dir, out: out, progress: progress, learner: ln,
		warmAccuracy: math.NaN(), startName: "start", resumed: resume != "", evalStep: -1,
		slow: slowSteps{fixed: s.record.slowFixed, auto: s.record.slowAuto}, busyEvery: busyEvery(progress)}
	models, control, err := r.loadModels(ctx, resume)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return &stopError{Reason: ErrInterrupted, Step: -1, Run: dir.Path()}
	}
	return r.train(ctx, models, control)
}

// closeRun closes the run directory and, when the run failed (err) before
// it wrote any step, removes what it created (discard; nil for a resumed
// run, whose directory is never removed).
func closeRun(dir *runlog.Dir, discard func() error, err error, out io.Writer) {
	dir.Close()
	if err != nil && discard != nil && !wroteAnything(dir) {
		if rmErr := discard(); rmErr == nil {
			fmt.Fprintf(out, "removed %s: the run ended before writing any step\n", dir.Path())
		}
	}
}

// wroteAnything reports whether the run has a metrics line or a complete
// checkpoint (or its checkpoints cannot be listed: keep it then).
func wroteAnything(dir *runlog.Dir) bool {
	steps, err := runlog.CompleteSteps(dir.CheckpointsPath())
	return dir.LastStep() >= 0 || len(steps) > 0 || err != nil
}

// runner is one run's state between the steps of Run: where it writes,
// and the few numbers the run's own records carry from step to step.
// The models and the controller state belong to the actors; the runner
// reaches them only through its Trainer.
type runner struct {
	settings *settings
	env      runEnv
	dir      *runlog.Dir
	out      io.Writer
	progress *runlog.Progress
	learner  *node.Node // this process's cluster node (nil under role all)

	trainer   *Trainer
	firstStep int64
	resumed   bool      // the run continues from a checkpoint
	tokens    float64   // cumulative prompt + completion tokens (train/num_tokens)
	skipped   int       // consecutive skipped steps (train.max_skipped_steps)
	skips     skipTally // every skipped step of this process, for the final line

	evalStep     int64   // the last step evaluated (-1: none), its greedy accuracy,
	evalAccuracy float64 // recorded in that step's checkpoint, and the problems
	evalN        int     // it was measured on

	warmAccuracy float64 // greedy accuracy of the policy RL started from (NaN: not measured)
	slow         slowSteps
	busyEvery    time.Duration         // how often the progress output says what a long step or chore is doing (busy.go)
	chore        atomic.Pointer[chore] // what the run's end is doing (busy.go)
	startName    string                // what that policy is: "warm start" or "start"

	guard      *guard.Watch // the collapse and no-signal rules (nil: train.guard off)
	warmMissed *guard.Alert // the warm start ended far below its target
}

// startLearnerNode starts the cluster node of a process with the learner
// role (nil under role all), so that a port already taken is refused
// before the run directory or a warm start exists. Worker nodes that find
// it before its coordinator runs are not answered and ask again.
func startLearnerNode(cfg *config.Config, s *settings, mp metric.MeterProvider) (*node.Node, error) {
	if cfg.Cluster.HasRole(config.RoleAll) {
		return nil, nil
	}
	join, err := joinReply(s, runName(cfg)) // the directory may add a -N to the name: within the bound's margin
	if err != nil {
		return nil, err
	}
	n, err := startNode(cfg.Cluster, true, messageBound(s, join), mp, os.Stderr)
	if err != nil || !cfg.Cluster.WeightStream {
		return n, err
	}
	if _, err := n.ServeBlobs(cfg.Cluster.WeightPort); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// loadModels builds the models the actors will own (startModels) and the
// starting controller state: a fresh optimiser and controller, or the
// resumed checkpoint's (range-checked: checkControllerState), with the
// weights its next batches are generated from.
func (r *runner) loadModels(ctx context.Context, resume string) (Models, rewards.ControllerState, error) {
	st := r.settings.start
	control := rewards.NewControllerState(st.tau, st.beta, st.meta)
	if st.guards {
		r.guard = guard.New(guard.Settings{Vocab: r.settings.model.Vocab, Group: r.settings.step.group, Objective: r.settings.step.prepare.Objective,
			NoWarmStart: st.checkpoint != "" && (!st.warmCheckpoint || r.settings.warm.steps == 0)})
	}
	policy, ref, err := r.startModels(ctx, resume)
	if err != nil {
		return Models{}, control, err
	}
	l, err := gpu.NewLearner(policy, r.settings.optim.learnerConfig(r.settings.optim.rl, r.env.device))
	if err != nil {
		return Models{}, control, err
	}
	if err := reserveLearner(l, r.settings); err != nil {
		return Models{}, control, err
	}
	if policy, ref, err = onDevice(r.env.device, policy, ref); err != nil {
		return Models{}, control, err
	}
	m := Models{Learner: l, Reference: ref, Policy: policy}
	if resume == "" {
		return m, control, nil
	}
	if control, err = r.resume(resume, &m); err != nil {
		return Models{}, control, fmt.Errorf("resume: %w", err)
	}
	fmt.Fprintf(r.out, "resumed from %s at step %d\n", resume, r.firstStep)
	return m, control, nil
}

// onDevice puts the policy the generators start from and the reference
// on the run's device (model.device), once each (a new run's two are one
// model), so that every actor of the process samples and scores where the
// learner trains; models made there (a warm start's) stay as they are.
func onDevice(dev gpu.Device, policy, ref *gpu.Model) (*gpu.Model, *gpu.Model, error) {
	p, err := policy.On(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("the policy on %s: %w", dev.Name(), err)
	}
	if ref == policy {
		return p, p, nil
	}
	r, err := ref.On(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("the reference on %s: %w", dev.Name(), err)
	}
	return p, r, nil
}

// resume restores what checkpoint ckpt holds besides the policy: the
// optimiser, the step and token count, the controller state (range-checked:
// checkControllerState), the weights its next batches are generated from,
// and the guards' memory.
func (r *runner) resume(ckpt string, m *Models) (rewards.ControllerState, error) {
	if err := m.Learner.LoadOptimizer(ckpt); err != nil {
		return rewards.ControllerState{}, err
	}
	st, err := runlog.LoadTrainerState(ckpt)
	if err != nil {
		return rewards.ControllerState{}, err
	}
	r.firstStep, r.tokens = int64(st.Step), st.Tokens
	m.Step = r.firstStep
	path := filepath.Join(ckpt, rewards.ControllerStateFile)
	control, err := rewards.LoadControllerState(path)
	if err != nil {
		return control, err
	}
	if err := checkControllerState(control, r.settings.step.prepare.Objective); err != nil {
		return control, fmt.Errorf("%s: %w", path, err)
	}
	if m.Behaviour, err = loadBehaviour(ckpt); err != nil {
		return control, err
	}
	for step, w := range m.Behaviour {
		if m.Behaviour[step], err = w.On(r.env.device); err != nil {
			return control, fmt.Errorf("behaviour weights of step %d: %w", step, err)
		}
	}
	return control, r.loadGuard(ckpt)
}

// verifyReference verifies the run's reference/ against its manifest. A
// run whose checkpoints predate manifests (ckpt is one) sealed no
// reference: it loads unverified, as those checkpoints do.
func verifyReference(refDir, ckpt string) error {
	err := runlog.Verify(refDir)
	if errors.Is(err, fs.ErrNotExist) && runlog.Legacy(ckpt) {
		return nil
	}
	return err
}

// loadGuard restores the guards' memory of the steps before the
// checkpoint dir, so that they judge the steps after it as the
// uninterrupted run's would. A checkpoint without one (written before the
// guards were saved, or with train.guard off) leaves them fresh, and says so.
func (r *runner) loadGuard(dir string) error {
	if r.guard == nil {
		return nil
	}
	path := filepath.Join(dir, guard.StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(r.out, "%s has no %s: the guards start afresh\n", dir, guard.StateFile)
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, r.guard); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// maxControllerValue bounds tau and beta read from a checkpoint: no
// controller of a run that learns gets near it, and larger values overflow
// the loss (the fault probe's beta 1e308 made every step NON_FINITE_LOSS).
const maxControllerValue = 1e6

// checkControllerState refuses a loaded controller state that no run can
// have reached: tau or beta outside [0, maxControllerValue], or tau 0 for
// the listwise objective, whose weights divide by it.
func checkControllerState(s rewards.ControllerState, objective rewards.Objective) error {
	for _, v := range []struct {
		name  string
		value float64
	}{{"tau", s.Tau}, {"beta", s.Beta}} {
		if !(v.value >= 0 && v.value <= maxControllerValue) {
			return fmt.Errorf("%s = %g: must be in [0, %g]: %w", v.name, v.value, maxControllerValue, runlog.ErrBadCheckpoint)
		}
	}
	if objective == rewards.ObjectiveMaxEntListwise && s.Tau == 0 {
		return fmt.Errorf("tau = 0: must be more than 0 for objective maxent_listwise: %w", runlog.ErrBadCheckpoint)
	}
	return nil
}

// loadBehaviour reads the behaviour/step-N models of checkpoint ckpt (none
// in synchronous runs).
func loadBehaviour(ckpt string) (map[int64]*gpu.Model, error) {
	entries, err := os.ReadDir(filepath.Join(ckpt, BehaviourDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[int64]*gpu.Model{}
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "step-")
		step, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || !e.IsDir() {
			return nil, fmt.Errorf("%s: unexpected %s: %w", filepath.Join(ckpt, BehaviourDir), e.Name(), runlog.ErrBadCheckpoint)
		}
		if out[step], err = gpu.LoadModel(filepath.Join(ckpt, BehaviourDir, e.Name())); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// startModels returns the RL start and the reference: those of the
// checkpoint being resumed, the model.checkpoint (both), or the warm start
// from random weights (both, saved as the run's reference).
func (r *runner) startModels(ctx context.Context, resume string) (policy, ref *gpu.Model, err error) {
	st := r.settings.start
	switch {
	case resume != "":
		refDir := filepath.Join(r.dir.Path(), ReferenceDir)
		if err := verifyReference(refDir, resume); err != nil {
			return nil, nil, fmt.Errorf("resume: reference: %w", err)
		}
		if ref, err = gpu.LoadModel(refDir); err != nil {
			return nil, nil, fmt.Errorf("resume: %w", err)
		}
		if policy, err = gpu.LoadModel(resume); err != nil {
			return nil, nil, fmt.Errorf("resume: %w", err)
		}
		return policy, ref, nil
	case st.checkpoint != "":
		loaded, err := gpu.LoadModel(st.checkpoint)
		if err != nil {
			return nil, nil, err
		}
		if policy, err = gpu.NewModelFromWeights(loaded.Config(), loaded.Weights(), 0); err != nil {
			return nil, nil, err
		}
		if st.warmCheckpoint && r.settings.warm.steps > 0 {
			if policy, err = r.warmStart(ctx, policy); err != nil {
				return nil, nil, err
			}
		}
	default:
		if policy, err = r.warmStart(ctx, nil); err != nil {
			return nil, nil, err
		}
	}
	refDir := filepath.Join(r.dir.Path(), ReferenceDir)
	if err := gpu.SaveCheckpoint(refDir, policy, r.settings.tokenizer); err != nil {
		return nil, nil, err
	}
	return policy, policy, runlog.Seal(refDir)
}

// train runs the RL steps through the actors, recording each, then writes
// the final checkpoint (unless it was resumed from it) and the report,
// and evaluates the policy (done). A new run first checkpoints step 0
// (the policy RL starts from), so a run killed at any later moment can be
// resumed. An interrupt, or too many skipped steps in a row, checkpoint
// the steps taken and return a *stopError.
func (r *runner) train(ctx context.Context, m Models, control rewards.ControllerState) error {
	p, err := r.startPipeline(m, control)
	if err != nil {
		return err
	}
	defer p.Stop()
	warmRegistry(p.sys)
	r.trainer = p.Trainer
	if err := r.recordStart(ctx); err != nil {
		return err
	}
	steps := int64(r.settings.record.cadence.steps)
	if !r.resumed && steps > 0 {
		if err := r.checkpoint(ctx, 0); err != nil {
			return err
		}
	}
	if r.resumed && r.firstStep == steps {
		fmt.Fprintf(r.out, "step %d is the run's last; its final evaluation did not end: running it\n", steps)
	}
	st := r.settings.step
	stopWatch := r.watchSteps(ctx, steps, r.busyEvery) // what a step that takes long is doing
	last, err := drive(ctx, p.Trainer, r.firstStep, steps, batchesAhead(st.staleness, st.syncEvery), r.record)
	stopWatch()
	var stop *stopError
	if errors.As(err, &stop) {
		return r.stopped(ctx, stop)
	}
	if err != nil {
		return err
	}
	r.progress.Done()
	quiet := r.watchEnd(ctx, r.busyEvery) // what the final checkpoint and evaluation are doing when they take long
	defer quiet()
	if !r.resumed || last > r.firstStep { // resumed at its last step: that step's checkpoint is the one loaded
		r.beginChore("final checkpoint", fmt.Sprintf("writing step %d", last))
		if err := r.checkpoint(ctx, last); err != nil {
			return err
		}
	}
	if ctx.Err() != nil && last < steps {
		return &stopError{Reason: ErrInterrupted, Step: last, Run: r.dir.Path()}
	}
	if err := r.dir.WriteReport(); err != nil {
		return err
	}
	return r.done(ctx, last, quiet)
}

// stopped ends a run that cannot progress: it keeps the state it stopped
// at, and the report.
func (r *runner) stopped(ctx context.Context, stop *stopError) error {
	r.progress.Done()
	if err := r.checkpoint(ctx, stop.Step); err != nil {
		return err
	}
	if err := r.dir.WriteReport(); err != nil {
		return err
	}
	if stop.Guard != "" {
		fmt.Fprintf(r.out, "stopped at step %d by the %s guard (train.guard=%s): checkpoint and outputs in %s\n", stop.Step, stop.Guard, config.GuardStop, r.dir.Path())
	}
	return stop
}

// done evaluates the policy of a run that took its last step, records
// the evaluation (final_eval.json: a resume then has nothing left to do)
// and writes the last lines: the policy's greedy accuracy (beside the one
// it started from), or why it could not be measured; the steps, those
// skipped and why; and where the outputs are. Interrupted before the
// evaluation ended, it records nothing and returns a *stopError: a resume
// runs the evaluation. quiet stops the line that says, while the
// evaluation takes long, what it does (watchEnd).
func (r *runner) done(ctx context.Context, last int64, quiet func()) error {
	r.beginChore("final evaluation", fmt.Sprintf("greedy decoding of up to %d held-out problems by the policy after step %d", r.settings.eval.prompts, last))
	final, err := r.finalEval(ctx, last)
	quiet() // what follows is printed on a clean line
	if err != nil && ctx.Err() != nil {
		return &stopError{Reason: ErrInterrupted, Step: last, Run: r.dir.Path(), Final: true}
	}
	if err != nil {
		fmt.Fprintf(r.out, "greedy accuracy not measured: %s\n", final.NotMeasured)
	} else {
		from := ""
		if !math.IsNaN(r.warmAccuracy) {
			from = fmt.Sprintf(" (%s %.1f%%)", r.startName, 100*r.warmAccuracy)
		}
		fmt.Fprintf(r.out, "greedy accuracy %.1f%%%s on %s\n", 100**final.GreedyAccuracy, from, heldOut(final.Problems, r.settings.eval.prompts))
	}
	if err := r.dir.WriteFinalEval(final); err != nil {
		return err
	}
	missed := ""
	if r.startName == "warm start" && r.warmAccuracy < warmStartTarget {
		missed = fmt.Sprintf(" (the warm start missed its %.0f%% target: %.1f%% greedy accuracy)", 100*warmStartTarget, 100*r.warmAccuracy)
	}
	fmt.Fprintf(r.out, "done: %d steps, %soutputs in %s%s\n", last, r.skipLine(), r.dir.Path(), missed)
	return nil
}

// finalEval is the greedy accuracy of the policy after the last step, as
// the run records it; err is why it was not measured (its line is in
// NotMeasured).
func (r *runner) finalEval(ctx context.Context, last int64) (runlog.FinalEval, error) {
	final := runlog.FinalEval{Step: int(last)}
	res, err := r.lastEvaluation(ctx, last)
	if err == nil && !(res.GreedyAccuracy >= 0 && res.GreedyAccuracy <= 1) {
		err = fmt.Errorf("greedy accuracy %v", res.GreedyAccuracy)
	}
	if err != nil {
		final.NotMeasured = clip(err.Error())
		return final, err
	}
	acc := res.GreedyAccuracy
	final.GreedyAccuracy, final.Problems = &acc, res.N
	return final, nil
}

// skipLine is the skipped steps' part of the final line ("" for none):
// those of this process, since the resume for a resumed run.
func (r *runner) skipLine() string {
	s := r.skips.String()
	switch {
	case s == "":
		return ""
	case r.resumed:
		return fmt.Sprintf("%s since the resume at step %d, ", s, r.firstStep)
	}
	return s + ", "
}

// heldOut names the problems an evaluation measured: n distinct ones,
// all there are when fewer than the want asked for.
func heldOut(n, want int) string {
	if n < want {
		return fmt.Sprintf("all %d held-out problems", n)
	}
	return fmt.Sprintf("%d held-out problems", n)
}

// startPipeline starts the actors: all in this process (role all), or on
// the learner node that worker nodes join (the learner role, with local
// pools for the other roles it also has: settings.pipeline).
func (r *runner) startPipeline(m Models, control rewards.ControllerState) (*Pipeline, error) {
	opt := r.settings.pipeline
	if r.learner == nil {
		return StartPipeline(r.settings, r.env, m, control, opt, os.Stderr), nil
	}
	join, err := joinReply(r.settings, r.env.id)
	if err != nil {
		return nil, err
	}
	opt.Cluster = &ClusterOptions{Join: join, Build: Build(), Protocol: ProtocolVersion, Seed: r.learner.Seed(), Notice: r.out, Refused: r.learner.Refused,
		Blobs: r.learner.BlobServer()}
	return StartPipelineOn(r.learner.System(), r.settings, r.env, m, control, opt), nil
}

// recordStart writes metrics line 0 of a new run: the greedy accuracy of
// the policy RL starts from (the warm start's, already measured, or that
// of model.checkpoint when evaluations are on). A resumed run reads it
// back instead, for its final line.
func (r *runner) recordStart(ctx context.Context) error {
	if r.resumed {
		if recs, err := runlog.ReadMetrics(r.dir.MetricsPath()); err == nil && len(recs) > 0 && recs[0].Step == 0 {
			if acc, ok := recs[0].Values[runlog.KeyEvalGreedyAccuracy]; ok {
				r.warmAccuracy = acc
			}
		}
		return nil
	}
	if math.IsNaN(r.warmAccuracy) && r.settings.record.cadence.eval > 0 {
		if acc, err := r.evaluate(ctx, r.trainer.Policy()); err == nil {
			r.warmAccuracy = acc
		}
	}
	if math.IsNaN(r.warmAccuracy) {
		return nil
	}
	m := map[string]float64{runlog.KeyEvalGreedyAccuracy: r.warmAccuracy}
	if a := r.warmMissed; a != nil && r.settings.start.guards {
		m[a.Key()] = float64(a.Level)
	}
	return r.dir.WriteMetrics(0, m)
}

// evaluate is the greedy accuracy on train.eval_prompts held-out problems
// (from the data set's held-out rows when it has them).
func (r *runner) evaluate(ctx context.Context, m *gpu.Model) (float64, error) {
	res, err := r.evaluation(ctx, m)
	return res.GreedyAccuracy, err
}

// lastEvaluation is the evaluation of the policy after step last: the
// one that step made (with train.eval_every on, the last step evaluates;
// greedy decoding of the same policy on the same problems gives the same
// result), else a new one (evaluations off, a run resumed at its last
// step, or that step's evaluation failed).
func (r *runner) lastEvaluation(ctx context.Context, last int64) (evaluate.Result, error) {
	if r.evalStep == last && r.evalN > 0 {
		return evaluate.Result{N: r.evalN, GreedyAccuracy: r.evalAccuracy}, nil
	}
	return r.evaluation(ctx, r.trainer.Policy())
}

// evaluation is evaluate's whole result (its N: how many distinct
// problems it measured).
func (r *runner) evaluation(ctx context.Context, m *gpu.Model) (evaluate.Result, error) {
	e := r.settings.eval
	s := evaluate.ModelSampler{Model: m, Tokenizer: e.tokenizer, Prompter: e.prompter, MaxNewTokens: e.maxNewTokens}
	return evaluate.Run(ctx, s, e.task, evaluate.Options{N: e.prompts, K: 1, GreedyOnly: true,
		Temperature: e.temperature, Seed: uint64(e.seed)})
}
