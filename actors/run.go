package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
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
	tp, err := newTracing(ctx, cfg, newNodeID(cfg.Cluster.Roles()[0]), cfg.Cluster.Roles())
	if err != nil {
		return err
	}
	defer tp.Shutdown(context.WithoutCancel(ctx)) // spans of an interrupted run too
	d.Tracer, d.NodeID = tp.Tracer(), tp.node
	ln, err := startLearnerNode(d) // its ports are taken now, not after a warm start
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.node.Stop()
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
	stopPage, err := servePage(cfg, dir, out)
	if err != nil {
		return err
	}
	defer stopPage()
	if d.Device.Name() != "cpu" {
		fmt.Fprintf(out, "learner on %s\n", d.Device.Info())
	}
	if ln != nil {
		fmt.Fprintf(out, "learner node: worker nodes join with --cluster.seeds %s (actors at %s)\n", ln.node.Seed(), ln.node.Address())
	}
	r := &runner{deps: d, dir: dir, out: out, progress: runlog.NewProgress(out, 10),
		warmAccuracy: math.NaN(), startName: "start", learner: ln}
	r.slow.fixed, r.slow.auto, _ = cfg.Trace.SlowThreshold() // valid: config checked it
	models, control, err := r.loadModels(ctx, resume)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted during the warm start: no checkpoint written")
		interrupted = true
		return nil
	}
	return r.train(ctx, models, control)
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
	deps     *Deps
	dir      *runlog.Dir
	out      io.Writer
	progress *runlog.Progress

	trainer   *Trainer
	firstStep int64
	tokens    float64 // cumulative prompt + completion tokens (train/num_tokens)

	warmAccuracy float64 // greedy accuracy of the policy RL started from (NaN: not measured)
	slow         slowSteps
	startName    string // what that policy is: "warm start" or "start"

	learner *learnerNode // this process's cluster node (nil under role all)

	guard      *guard.Watch // the collapse and no-signal rules (nil: train.guard off)
	warmMissed *guard.Alert // the warm start ended far below its target
}

// learnerNode is the cluster node of a learner-role process and the join
// reply it gives worker nodes.
type learnerNode struct {
	node *node.Node
	join *messages.JoinReply
}

// startLearnerNode starts the cluster node of a process with the learner
// role (nil under role all), so that a port already taken is refused
// before the run directory or a warm start exists. Worker nodes that find
// it before its coordinator runs are not answered and ask again.
func startLearnerNode(d *Deps) (*learnerNode, error) {
	if d.Cfg.Cluster.HasRole(config.RoleAll) {
		return nil, nil
	}
	join, err := joinReply(d)
	if err != nil {
		return nil, err
	}
	n, err := startNode(d.Cfg, true, messageBound(d, join), os.Stderr)
	if err != nil {
		return nil, err
	}
	return &learnerNode{node: n, join: join}, nil
}

// loadModels builds the models the actors will own (startModels) and the
// starting controller state: a fresh optimiser and controller, or the
// resumed checkpoint's.
func (r *runner) loadModels(ctx context.Context, resume string) (Models, rewards.ControllerState, error) {
	d := r.deps
	control := rewards.NewControllerState(d.Cfg.MaxEnt.Tau, d.Cfg.MaxEnt.Beta, d.Meta)
	policy, ref, err := r.startModels(ctx, resume)
	if err != nil {
		return Models{}, control, err
	}
	l, err := gpu.NewLearner(policy, learnerConfig(d, rlSchedule(d.Cfg)))
	if err != nil {
		return Models{}, control, err
	}
	if resume != "" {
		if err := l.LoadOptimizer(resume); err != nil {
			return Models{}, control, fmt.Errorf("resume: %w", err)
		}
		st, err := runlog.LoadTrainerState(resume)
		if err != nil {
			return Models{}, control, fmt.Errorf("resume: %w", err)
		}
		r.firstStep, r.tokens = int64(st.Step), st.Tokens
		if control, err = rewards.LoadControllerState(filepath.Join(resume, rewards.ControllerStateFile)); err != nil {
			return Models{}, control, fmt.Errorf("resume: %w", err)
		}
		fmt.Fprintf(r.out, "resumed from %s at step %d\n", resume, r.firstStep)
	}
	return Models{Learner: l, Reference: ref, Policy: policy}, control, nil
}

// startModels returns the RL start and the reference: those of the
// checkpoint being resumed, the model.checkpoint (both), or the warm start
// from random weights (both, saved as the run's reference).
func (r *runner) startModels(ctx context.Context, resume string) (policy, ref *gpu.Model, err error) {
	d := r.deps
	switch {
	case resume != "":
		if ref, err = gpu.LoadModel(filepath.Join(r.dir.Path(), ReferenceDir)); err != nil {
			return nil, nil, fmt.Errorf("resume: %w", err)
		}
		if policy, err = gpu.LoadModel(resume); err != nil {
			return nil, nil, fmt.Errorf("resume: %w", err)
		}
		return policy, ref, nil
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

// train runs the RL steps through the actors, recording each, then writes
// the final checkpoint and the report.
func (r *runner) train(ctx context.Context, m Models, control rewards.ControllerState) error {
	d := r.deps
	p, stop, err := r.startPipeline(m, control)
	if err != nil {
		return err
	}
	defer stop()
	r.trainer = p.Trainer
	if err := r.recordStart(ctx); err != nil {
		return err
	}
	if d.Cfg.Train.Guard != config.GuardOff {
		r.guard = guard.New(guard.Settings{Vocab: d.Model.Vocab, Group: d.Cfg.Generation.NumGenerations, Objective: d.Prepare.Objective})
	}
	ahead := batchesAhead(d.Cfg.Train.MaxStaleness, d.Cfg.Train.SyncEvery)
	last, err := drive(ctx, p.Trainer, r.firstStep, int64(d.Cfg.Train.Steps), ahead, r.record)
	var stopped *StoppedError
	if errors.As(err, &stopped) {
		last = int64(stopped.Alert.Step)
	} else if err != nil {
		return err
	}
	r.progress.Done()
	if err := r.checkpoint(context.WithoutCancel(ctx), last); err != nil {
		return err
	}
	if err := r.dir.WriteReport(); err != nil {
		return err
	}
	if acc, err := r.evaluate(ctx, r.trainer.Policy()); err == nil {
		from := ""
		if !math.IsNaN(r.warmAccuracy) {
			from = fmt.Sprintf(" (%s %.1f%%)", r.startName, 100*r.warmAccuracy)
		}
		fmt.Fprintf(r.out, "greedy accuracy %.1f%%%s on %d held-out problems\n", 100*acc, from, max(d.Cfg.Train.EvalPrompts, 1))
	}
	if stopped != nil {
		fmt.Fprintf(r.out, "stopped at step %d by the %s guard (train.guard=%s): checkpoint and outputs in %s\n", last, stopped.Alert.Rule, config.GuardStop, r.dir.Path())
		return stopped
	}
	missed := ""
	if r.startName == "warm start" && r.warmAccuracy < warmStartTarget {
		missed = fmt.Sprintf(" (the warm start missed its %.0f%% target: %.1f%% greedy accuracy)", 100*warmStartTarget, 100*r.warmAccuracy)
	}
	fmt.Fprintf(r.out, "done: %d steps, outputs in %s%s\n", last, r.dir.Path(), missed)
	return nil
}

// StoppedError is the error of a run a guard stopped (train.guard=stop):
// its checkpoint, report and final line were written.
type StoppedError struct {
	Alert guard.Alert
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped at step %d by the %s guard: %s", e.Alert.Step, e.Alert.Rule, e.Alert.Text)
}

// startPipeline starts the actors: all in this process (role all), or on
// a learner node that worker nodes join (the learner role, with local pools
// for the other roles it also has).
func (r *runner) startPipeline(m Models, control rewards.ControllerState) (*Pipeline, func(), error) {
	d := r.deps
	opt := pipelineOptionsOf(d)
	cl := d.Cfg.Cluster
	if cl.HasRole(config.RoleAll) {
		p := StartPipeline(d, m, control, opt, os.Stderr)
		return p, p.Stop, nil
	}
	n, join := r.learner.node, r.learner.join
	opt.Generators, opt.RewardEvaluators, opt.ReferenceScorers = 0, 0, 0
	if cl.HasRole(config.RoleGenerator) {
		opt.Generators = max(cl.Generators, 1)
	}
	if cl.HasRole(config.RoleReward) {
		opt.RewardEvaluators = max(cl.RewardEvaluators, 1)
	}
	if cl.HasRole(config.RoleReference) {
		opt.ReferenceScorers = 1
	}
	opt.Cluster = &ClusterOptions{Join: join, Build: Build(), Protocol: ProtocolVersion, Seed: n.Seed(), Notice: r.out}
	if !loopbackHost(cl.Host) && cl.Insecure {
		fmt.Fprintf(r.out, "warning: cluster.insecure: nodes talk in plaintext on %s; anyone who can reach it can join the run\n", cl.Host)
	}
	p := StartPipelineOn(n.System(), d, m, control, opt)
	return p, p.Stop, nil
}

// recordStart writes metrics line 0 of a new run: the greedy accuracy of
// the policy RL starts from (the warm start's, already measured, or that
// of model.checkpoint when evaluations are on). A resumed run reads it
// back instead, for its final line.
func (r *runner) recordStart(ctx context.Context) error {
	if r.firstStep > 0 {
		if recs, err := runlog.ReadMetrics(r.dir.MetricsPath()); err == nil && len(recs) > 0 && recs[0].Step == 0 {
			if acc, ok := recs[0].Values[runlog.KeyEvalGreedyAccuracy]; ok {
				r.warmAccuracy = acc
			}
		}
		return nil
	}
	if math.IsNaN(r.warmAccuracy) && r.deps.Cfg.Train.EvalEvery > 0 {
		if acc, err := r.evaluate(ctx, r.trainer.Policy()); err == nil {
			r.warmAccuracy = acc
		}
	}
	if math.IsNaN(r.warmAccuracy) {
		return nil
	}
	m := map[string]float64{runlog.KeyEvalGreedyAccuracy: r.warmAccuracy}
	if a := r.warmMissed; a != nil && r.deps.Cfg.Train.Guard != config.GuardOff {
		m[a.Key()] = float64(a.Level)
	}
	return r.dir.WriteMetrics(0, m)
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
