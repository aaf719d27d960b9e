package tests

import (
	"context"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/rewards"
)

// learningConfig is the CI learning recipe: the small preset on 2-digit
// addition (policy-and-tasks.md §5, §6.6): a supervised warm start at the
// default lr 2e-3 to about 40% greedy accuracy, then GRPO at lr 1e-4 with
// 16 prompts × 8 and dynamic sampling.
//
// Measured with seed 1 (greedy accuracy on 256 held-out problems): this
// Llama (RoPE, SwiGLU) learns the carry in a jump, around which single
// checks swing by ±15 points and whose step moves with float rounding, so
// the warm start stops once two consecutive checks (25 steps apart) reach
// 40%, not after a fixed count. The warm-start lr matters more than its
// length: after lr 2e-3 (stopped at step 675, 50%) GRPO reached 77% in 100
// steps and 82–86% in 200–400; after lr 3e-3 (stopped at 44–56%) it gained
// only 1–13 points and plateaued, whatever the RL lr (5e-5 to 3e-4), batch
// (16 or 32 prompts) or group size (8 or 16).
func learningConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Train.WarmStartSteps = 2000 // at most; see warmTarget
	cfg.Optim.WarmStartLR = 2e-3
	cfg.Train.Steps = 200
	cfg.Train.DynamicSampling = true
	cfg.Train.PromptsPerStep = 16
	cfg.Generation.NumGenerations = 8
	cfg.Optim.LR = 1e-4
	cfg.Train.Seed = 1
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// warmTarget is the greedy accuracy that ends the warm start.
const warmTarget = 0.40

// greedyAccuracy is the greedy exact-match accuracy on 256 held-out problems.
func greedyAccuracy(t *testing.T, d *actors.Deps, m *gpu.Model) float64 {
	t.Helper()
	s := evaluate.ModelSampler{Model: m, Tokenizer: d.Tokenizer, MaxNewTokens: d.Cfg.Generation.MaxCompletionLen}
	r, err := evaluate.Run(context.Background(), s, d.Task, evaluate.Options{N: 256, K: 1, Temperature: 1, Seed: 7})
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	return r.GreedyAccuracy
}

// rl trains from the warm-started model for cfg.Train.Steps steps through
// the actor pipeline and returns the final policy.
func rl(t *testing.T, cfg *config.Config, warm *gpu.Model, shuffle bool) *gpu.Model {
	t.Helper()
	d, err := actors.NewDeps(cfg, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	d.ShuffleRewards = shuffle
	o := cfg.Optim
	l, err := gpu.NewLearner(warm, gpu.LearnerConfig{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay, MaxGradNorm: o.GradClip})
	if err != nil {
		t.Fatal(err)
	}
	cs := rewards.NewControllerState(cfg.MaxEnt.Tau, cfg.MaxEnt.Beta, d.Meta)
	p := actors.StartPipeline(d, actors.Models{Learner: l, Reference: warm, Policy: warm}, cs, actors.PipelineOptions{Generators: 1, RewardEvaluators: 1, Retries: 1}, nil)
	defer p.Stop()
	start := time.Now()
	for n := range int64(cfg.Train.Steps) {
		r, err := actors.Step(context.Background(), p.Trainer, n)
		if err != nil {
			t.Logf("step %d skipped: %v", n, err)
			continue
		}
		if n%50 == 0 {
			t.Logf("shuffle=%v step %d: reward %.3f acc %.3f loss %.4f kl %.4f entropy %.3f (%.1fs)", shuffle, n, r.GetRewardMean(), r.GetAccuracy(), r.GetLoss(), r.GetKl(), r.GetEntropy(), time.Since(start).Seconds())
		}
	}
	return l.Snapshot()
}

// TestLongLearnsAddition is the learning test of the issue: GRPO from a
// warm start raises greedy addition accuracy by at least 15 points, and
// the same run with rewards shuffled within each batch does not. The warm
// start runs once and both RL runs start from it. Measured (seed 1, 2
// cores): with OpenBLAS (make test) the warm start stopped at step 675 at
// 50.0%, GRPO reached 82.0% and the shuffled-reward control fell to 8.2%,
// 49 s in all; with pure-Go BLAS 52.7% → 87.9%, control 10.2%, 151 s.
func TestLongLearnsAddition(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a full warm start and two RL runs")
	}
	cfg := learningConfig(t)
	d, err := actors.NewDeps(cfg, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	m0, err := gpu.NewModel(d.Model, uint64(cfg.Model.Seed))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	above := 0 // consecutive checks at or over warmTarget
	warm, err := actors.WarmStart(context.Background(), d, m0, func(step int, st gpu.StepStats, policy func() *gpu.Model) bool {
		if step%25 != 0 || step < 600 {
			return false
		}
		acc := greedyAccuracy(t, d, policy())
		t.Logf("warm start step %d: loss %.4f, greedy accuracy %.3f (%.1fs)", step, st.Loss, acc, time.Since(start).Seconds())
		above++
		if acc < warmTarget {
			above = 0
		}
		return above >= 2
	})
	if err != nil {
		t.Fatal(err)
	}
	before := greedyAccuracy(t, d, warm)
	t.Logf("warm start: greedy accuracy %.3f (%.1fs)", before, time.Since(start).Seconds())
	after := greedyAccuracy(t, d, rl(t, cfg, warm, false))
	t.Logf("GRPO: greedy accuracy %.3f (%.1fs)", after, time.Since(start).Seconds())
	control := greedyAccuracy(t, d, rl(t, cfg, warm, true))
	t.Logf("shuffled-reward control: greedy accuracy %.3f (%.1fs)", control, time.Since(start).Seconds())
	if after < before+0.15 {
		t.Errorf("GRPO accuracy %.3f, want at least warm start %.3f + 0.15", after, before)
	}
	if control >= before+0.15 {
		t.Errorf("shuffled-reward control accuracy %.3f rose 15 points over the warm start %.3f: the signal is not the reward", control, before)
	}
}
