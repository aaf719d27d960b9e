package actors

import (
	"testing"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// refScoredWithEntropies is one prompt with four equally likely rollouts of
// the given rewards and summed token entropies (two tokens each).
func refScoredWithEntropies(t *testing.T, rs, entropies []float64) *messages.RefScored {
	t.Helper()
	meta := messages.NewMeta("run", 1, "b", 0)
	ro := &messages.Rollouts{Meta: meta, Prompts: []*messages.Prompt{{Index: 0, Text: "1+1=", TokenIds: []int32{1, 20, 14, 20, 32}, Answer: "2"}}, NumGenerations: int32(len(rs))}
	perFunc := make([][]float64, len(rs))
	ref := make([]*messages.TokenLogprobs, len(rs))
	for i, h := range entropies {
		ro.Rollouts = append(ro.Rollouts, &messages.Rollout{
			TokenIds: []int32{21, 2}, Logp: []float32{-1, -1}, Entropy: []float32{float32(h / 2), float32(h / 2)}, Text: "2",
		})
		perFunc[i] = []float64{rs[i]}
		ref[i] = &messages.TokenLogprobs{Logp: []float32{-1, -1}}
	}
	sc, err := messages.NewScored(meta, ro, []string{"accuracy"}, []float64{1}, perFunc)
	if err != nil {
		t.Fatal(err)
	}
	return &messages.RefScored{Meta: meta, Scored: sc, Ref: ref, RefLogpSum: []float64{-2, -2, -2, -2}}
}

// TestPrepareEntropyBonusReadsRolloutEntropy checks that grpo_entropy_bonus
// ranks equally rewarded completions by the exact entropies the generator
// recorded (spec 1.6), not by their sampled log-probs, which are equal here.
func TestPrepareEntropyBonusReadsRolloutEntropy(t *testing.T) {
	cfg := rewards.DefaultPrepareConfig()
	cfg.Objective, cfg.EntropyBonusCoef = rewards.ObjectiveGRPOEntropyBonus, 0.5
	rs := refScoredWithEntropies(t, []float64{1, 1, 0, 0}, []float64{3, 1, 2, 2})
	before := messages.Hash(rs)
	_, p, err := prepare(cfg, rs, controllerMessage(nil, rewards.NewControllerState(0.5, 0, rewards.DefaultMetaController())))
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Advantages; !(a[0] > a[1]) || a[2] != a[3] {
		t.Errorf("advantages %v: want a[0] > a[1] (higher entropy, same reward) and a[2] == a[3]", a)
	}
	if err := messages.Unchanged(before, rs); err != nil {
		t.Error(err)
	}
}
