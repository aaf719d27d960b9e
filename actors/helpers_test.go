package actors

import (
	"context"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
	"google.golang.org/protobuf/proto"
)

// testConfig is the tiny preset with a small batch: 4 prompts × 4
// completions of 2-digit addition, seed 1, synchronous, rewards accuracy
// plus half the length penalty.
func testConfig(t *testing.T, mutate func(*config.Config)) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Model.Preset = "tiny"
	cfg.Train.PromptsPerStep = 4
	cfg.Generation.NumGenerations = 4
	cfg.Train.WarmStartSteps = 0
	cfg.Train.Seed = 1
	cfg.Optim.LR = 1e-3
	// The length penalty varies with the length of the random model's
	// malformed completions, so GRPO advantages are not all zero.
	cfg.Rewards.Funcs, cfg.Rewards.Weights = []string{"accuracy", "length"}, []float64{1, 0.5}
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return cfg
}

// testSettings resolves cfg as Run does.
func testSettings(t testing.TB, cfg *config.Config) *settings {
	t.Helper()
	s, err := newSettings(cfg)
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	return s
}

// testEnv is a run "test" on the CPU that reports nothing.
func testEnv() runEnv { return runEnv{id: "test", tel: quiet(), device: gpu.CPU{}} }

// testModels returns fresh models from the config's seed: a learner, the
// same initial weights as the frozen reference and the generators' policy.
func testModels(t testing.TB, s *settings) Models {
	t.Helper()
	m, err := gpu.NewModel(s.model, s.start.modelSeed)
	if err != nil {
		t.Fatalf("model: %v", err)
	}
	l, err := gpu.NewLearner(m, s.optim.learnerConfig(s.optim.rl, gpu.CPU{}))
	if err != nil {
		t.Fatalf("learner: %v", err)
	}
	return Models{Learner: l, Reference: m, Policy: m}
}

// testControl is the controllers' first state.
func testControl(s *settings) rewards.ControllerState {
	return rewards.NewControllerState(s.start.tau, s.start.beta, s.control.Meta)
}

// plainStep runs step n of t with Step's plain pace.
func plainStep(t testing.TB, tr *Trainer, n int64) *Outcome {
	t.Helper()
	out, err := Step(context.Background(), tr, n, inOrder)
	if err != nil {
		t.Fatalf("step %d: %v", n, err)
	}
	return out
}

// sameReport compares two learner reports on their numbers, leaving out
// how long the learner's phases took.
func sameReport(a, b *messages.StepReport) bool {
	untimed := func(r *messages.StepReport) *messages.StepReport {
		c := proto.CloneOf(r)
		c.ForwardSeconds, c.BackwardSeconds, c.OptimizerSeconds = 0, 0, 0
		return c
	}
	return proto.Equal(untimed(a), untimed(b))
}
