package actors

import (
	"context"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
)

// TestLearnRaisesAdvantagedLogp is the sign test of the learner stage: one
// GRPO step on a batch raises Σ_i A_i·log π(y_i), the advantage-weighted
// sequence log-prob of the batch's own completions.
func TestLearnRaisesAdvantagedLogp(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Optim.LR = 1e-2 })
	s := testSettings(t, cfg)
	m := testModels(t, s)
	tr := NewTrainer(s, "test", m, testControl(s))
	b, err := tr.produce(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	pb, _, err := prepare(s.step.prepare, b.ref, tr.control)
	if err != nil {
		t.Fatal(err)
	}
	seqs := sequences(b.ref.GetScored().GetRollouts())
	objective := func(model *gpu.Model) float64 {
		scores, err := model.Score(seqs, cfg.Generation.Temperature)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for i, s := range scores {
			for _, lp := range s.LogProbs {
				sum += pb.GetAdvantages()[i] * lp
			}
		}
		return sum
	}
	before := objective(m.Learner.Snapshot())
	if _, err := learn(m.Learner, s.learn, pb); err != nil {
		t.Fatal(err)
	}
	after := objective(m.Learner.Snapshot())
	if !(after > before) {
		t.Fatalf("Σ A·logp went from %v to %v after one step, want it to rise", before, after)
	}
}
