package actors

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// WarmStartHook is called after each warm-start step (1-based) with its
// statistics and a function returning the current weights (a snapshot,
// made only when called); returning true ends the warm start there, e.g.
// once greedy accuracy reaches a target (DESIGN §4: "until greedy accuracy
// is ~20–50%").
type WarmStartHook func(step int, st gpu.StepStats, policy func() *gpu.Model) (stop bool)

// WarmStart trains m supervised, for up to train.warm_start_steps steps of
// train.warm_start_batch generated problems with their correct solutions
// (prompt → solution + EOS), at optim.warm_start_lr with its own optimiser
// (DESIGN §4). It returns the trained model at policy version 0: the RL
// starting point and the frozen reference. hook, if set, is called after
// each step and may stop early. The warm start also stops early,
// returning the model so far, when ctx is cancelled.
func WarmStart(ctx context.Context, d *Deps, m *gpu.Model, hook WarmStartHook) (*gpu.Model, error) {
	o := d.Cfg.Optim
	l, err := gpu.NewLearner(m, gpu.LearnerConfig{LR: o.WarmStartLR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps,
		WeightDecay: o.WeightDecay, MaxGradNorm: o.GradClip, Device: d.Device})
	if err != nil {
		return nil, fmt.Errorf("warm start: %w", err)
	}
	for step := 1; step <= d.Cfg.Train.WarmStartSteps && ctx.Err() == nil; step++ {
		seqs, err := solutionBatch(d, int64(step))
		if err != nil {
			return nil, fmt.Errorf("warm start step %d: %w", step, err)
		}
		st, err := l.SupervisedStep(seqs)
		if err != nil {
			return nil, fmt.Errorf("warm start step %d: %w", step, err)
		}
		if hook != nil && hook(step, st, l.Snapshot) {
			break
		}
	}
	return gpu.NewModelFromWeights(d.Model, l.Snapshot().Weights(), 0)
}

// solutionBatch draws warm-start step's problems and their solutions as
// sequences (the prompt as the policy reads it, solution + EOS).
func solutionBatch(d *Deps, step int64) ([]gpu.Sequence, error) {
	rng := rand.New(rand.NewPCG(stageSeed(d.Cfg.Train.Seed, step, stageWarmStart, 0), uint64(d.Cfg.Task.Seed)))
	problems := tasks.Batch(d.Task, rng, d.Cfg.Train.WarmStartBatch)
	seqs := make([]gpu.Sequence, len(problems))
	for i, p := range problems {
		sol, err := d.Task.Solution(p, rng)
		if err != nil {
			return nil, err
		}
		prompt, err := d.Prompter.Encode(p.Prompt)
		if err != nil {
			return nil, err
		}
		completion, err := d.Tokenizer.Encode(sol)
		if err != nil {
			return nil, err
		}
		seqs[i] = gpu.Sequence{Prompt: prompt, Completion: append(completion, d.Tokenizer.EOS())}
	}
	return seqs, nil
}
