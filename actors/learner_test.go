package actors

import (
	"context"
	"math"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// learnerBatch returns fresh settings and models of cfg and the prepared
// batch of its first step, whose rollouts edit (when not nil) may change
// first.
func learnerBatch(t *testing.T, cfg *config.Config, edit func(*messages.Rollouts)) (*settings, Models, *messages.PreparedBatch) {
	t.Helper()
	s := testSettings(t, cfg)
	m := testModels(t, s)
	tr := NewTrainer(s, "test", m, testControl(s))
	b, err := tr.produce(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(b.ref.GetScored().GetRollouts())
	}
	pb, _, err := prepare(s.step.prepare, b.ref, tr.control)
	if err != nil {
		t.Fatal(err)
	}
	return s, m, pb
}

// TestLearnRaisesAdvantagedLogp is the sign test of the learner stage: one
// GRPO step on a batch raises Σ_i A_i·log π(y_i), the advantage-weighted
// sequence log-prob of the batch's own completions.
func TestLearnRaisesAdvantagedLogp(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Optim.LR = 1e-2 })
	s, m, pb := learnerBatch(t, cfg, nil)
	seqs := sequences(pb.GetRefScored().GetScored().GetRollouts())
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

// TestLearnReportsPolicyMetrics: the learner's report carries twinkle's
// GRPOMetric of the step (rewards.PolicyMetrics over the whole batch):
// the same values as PolicyMetrics computed here from an independent
// forward pass (gpu.Model.Score of the policy before the step) and the
// rollouts' log-probs, at temperature 0.7 (log-probs × 0.7), with the clip
// rule of each policy loss, and the metrics.top_k_kl tokens named by
// completion and position. The behaviour log-probs are shifted by ±0.4 per
// completion so that ratios leave [0.8, 1.2] on both sides.
func TestLearnReportsPolicyMetrics(t *testing.T) {
	const temp = 0.7
	for _, policy := range []string{loss.PolicyVanilla, loss.PolicyGSPO, loss.PolicyCISPO} {
		t.Run(policy, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Generation.Temperature, c.Metrics.TopKKL, c.Loss.PolicyLoss = temp, 5, policy
			})
			s, m, pb := learnerBatch(t, cfg, func(ro *messages.Rollouts) {
				for i, r := range ro.GetRollouts() {
					for t := range r.Logp {
						r.Logp[t] += float32(0.4 * float64(1-2*(i%2)))
					}
				}
			})
			want := wantPolicyMetrics(t, m.Learner.Snapshot(), pb, temp, cfg)
			rep, err := learn(m.Learner, s.learn, pb)
			if err != nil {
				t.Fatal(err)
			}
			got := policyStats(rep.GetPolicyMetrics())
			if got == nil || got.Tokens != int(rep.GetTokens()) || got.Tokens != want.Tokens {
				t.Fatalf("policy metrics %+v for %d tokens, want %d", got, rep.GetTokens(), want.Tokens)
			}
			checkPolicyStats(t, *got, want)
			checkHighKL(t, got.HighKL, pb, temp)
		})
	}
}

// wantPolicyMetrics is rewards.PolicyMetrics of pb with the new log-probs
// of policy's own forward pass (Score) and the rollouts' log-probs.
func wantPolicyMetrics(t *testing.T, policy *gpu.Model, pb *messages.PreparedBatch, temp float64, cfg *config.Config) rewards.PolicyStats {
	t.Helper()
	ro := pb.GetRefScored().GetScored().GetRollouts()
	seqs := sequences(ro)
	scores, err := policy.Score(seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	width := 1
	for _, q := range seqs {
		width = max(width, len(q.Completion))
	}
	lp, ent := make([][]float32, len(scores)), make([][]float32, len(scores))
	for i, s := range scores {
		lp[i], ent[i] = messages.Float32s(s.LogProbs), messages.Float32s(s.Entropies)
	}
	tb := rewards.TokenBatch{N: len(seqs), T: width, NewLogp: padTokens(lp, width), OldLogp: padTokens(behaviourRows(ro), width),
		Entropy: padTokens(ent, width), Mask: gpu.Batch{Seqs: seqs, Width: width}.Mask(), Advantages: pb.GetAdvantages()}
	st, err := rewards.PolicyMetrics(tb, rewards.PolicyMetricsConfig{EpsilonLow: cfg.Loss.Epsilon, EpsilonHigh: cfg.Loss.EpsilonHigh,
		Temperature: temp, Variant: policyVariant(cfg.Loss.PolicyLoss)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkPolicyStats compares the learner's statistics with an independent
// computation: the log-prob statistics to the float32 forward pass's
// precision, the clip fractions exactly (no ratio is near a clip edge).
func checkPolicyStats(t *testing.T, got, want rewards.PolicyStats) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"mean_new_logp", got.MeanNewLogp, want.MeanNewLogp}, {"policy_confidence", got.PolicyConfidence, want.PolicyConfidence},
		{"mean_old_logp", got.MeanOldLogp, want.MeanOldLogp}, {"logp_diff_mean", got.LogpDiffMean, want.LogpDiffMean},
		{"approx_kl", got.ApproxKL, want.ApproxKL}, {"token_kl_max", got.TokenKLMax, want.TokenKLMax},
		{"token_ratio_max", got.TokenRatioMax, want.TokenRatioMax}, {"entropy", got.Entropy, want.Entropy},
		{"clip_ratio_low", got.ClipRatioLow, want.ClipRatioLow}, {"clip_ratio_high", got.ClipRatioHigh, want.ClipRatioHigh},
	} {
		if math.Abs(c.got-c.want) > 1e-4*max(1, math.Abs(c.want)) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !got.HasOld || !got.HasEntropy || !got.HasClip || got.ClipRatioLow == 0 || got.ClipRatioHigh == 0 {
		t.Errorf("policy metrics %+v: want old log-probs, entropy and clipping on both sides", got)
	}
}

// checkHighKL checks the top_k_kl records against the batch: five, the
// largest K3 first, each the K3 of its own log-probs, the rollout's token
// and log-prob (× temp) at its place and its completion's advantage.
func checkHighKL(t *testing.T, high []rewards.HighKLToken, pb *messages.PreparedBatch, temp float64) {
	t.Helper()
	ro := pb.GetRefScored().GetScored().GetRollouts().GetRollouts()
	if len(high) != 5 {
		t.Fatalf("%d top-KL tokens, want 5", len(high))
	}
	for i, h := range high {
		r := ro[h.Seq]
		d := h.LogpNew - h.LogpOld
		if i > 0 && h.KL > high[i-1].KL || math.Abs(h.KL-(math.Exp(d)-d-1)) > 1e-12 || h.TokenID != int(r.GetTokenIds()[h.Pos]) ||
			h.LogpOld != temp*float64(r.GetLogp()[h.Pos]) || h.Advantage != pb.GetAdvantages()[h.Seq] {
			t.Errorf("top-KL token %d = %+v: not the batch's", i, h)
		}
	}
}
