package actors

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/config"
)

// TestPipelineMatchesStep runs 3 synchronous steps of the tiny preset
// (seed 1) through Step's plain calls and through the actors, and requires
// bit-identical StepReports (DESIGN §2).
func TestPipelineMatchesStep(t *testing.T) {
	for _, tc := range []struct{ objective, policyLoss string }{
		{config.ObjectiveGRPO, config.PolicyLossVanilla},
		{config.ObjectiveGRPO, config.PolicyLossGSPO},
		{config.ObjectiveGRPO, config.PolicyLossCISPO},
		{config.ObjectiveGRPOEntropyBonus, config.PolicyLossVanilla},
		{config.ObjectiveMaxEntListwise, config.PolicyLossVanilla},
		{config.ObjectiveMaxEntEntropy, config.PolicyLossVanilla},
	} {
		objective := tc.objective
		t.Run(objective+"/"+tc.policyLoss, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.MaxEnt.Objective = objective
				c.Loss.PolicyLoss = tc.policyLoss
				c.MaxEnt.Alpha = 0.1
				c.MaxEnt.Beta = 0.01
				if objective == config.ObjectiveGRPOEntropyBonus {
					c.MaxEnt.EntropyBonusCoef = 0.1
				}
			})
			d := testDeps(t, cfg)
			plain := NewTrainer(d, testModels(t, d), testControl(d))
			p := StartPipeline(d, testModels(t, d), testControl(d), pipelineOptionsOf(d), nil)
			defer p.Stop()
			ctx := context.Background()
			for n := range int64(3) {
				want, err := Step(ctx, plain, n)
				if err != nil {
					t.Fatalf("step %d (plain): %v", n, err)
				}
				got, err := Step(ctx, p.Trainer, n)
				if err != nil {
					t.Fatalf("step %d (actors): %v", n, err)
				}
				if !proto.Equal(got, want) {
					t.Fatalf("step %d: actors report\n%v\nplain report\n%v", n, got, want)
				}
				t.Logf("step %d: loss %.6g reward %.3g acc %.3g kl %.3g went %.3g tokens %d", n, got.GetLoss(), got.GetRewardMean(), got.GetAccuracy(), got.GetKl(), got.GetWeightEntropy(), got.GetTokens())
				if got.GetMeta().GetPolicyVersion() != n+1 {
					t.Errorf("step %d: policy version %d, want %d", n, got.GetMeta().GetPolicyVersion(), n+1)
				}
			}
		})
	}
}
