package actors

import (
	"fmt"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// prepare turns a reference-scored batch into what the learner trains on.
// Everything derived from the raw rewards is computed here, once, by
// rewards.Prepare (spec §1.2–1.8): utilities, advantages (SEED-scaled when
// enabled), q and, for maxent_listwise, the weights at the controller's
// current tau and beta. The reward names and weights are the ones the
// batch says it was scored with.
func prepare(cfg rewards.PrepareConfig, rs *messages.RefScored, cs *messages.ControllerState) (*messages.PreparedBatch, *rewards.Prepared, error) {
	step := rs.GetMeta().GetStep()
	if err := messages.CheckRefScored(rs); err != nil {
		return nil, nil, fmt.Errorf("prepare step %d: %w", step, err)
	}
	sc := rs.GetScored()
	ro := sc.GetRollouts()
	n := len(ro.GetRollouts())
	in := rewards.PrepareInput{
		K:                int(ro.GetNumGenerations()),
		Rewards:          transpose(sc.RewardMatrix(), len(sc.GetRewardNames())),
		Truncated:        sc.GetTruncated(),
		TokenCounts:      make([]int, n),
		RefLogpSums:      rs.GetRefLogpSum(),
		Completions:      make([]string, n),
		BehaviorLogpSums: make([]float64, n),
	}
	for i, r := range ro.GetRollouts() {
		in.TokenCounts[i] = len(r.GetTokenIds())
		in.Completions[i] = r.GetText()
		for _, v := range r.GetLogp() {
			in.BehaviorLogpSums[i] += float64(v)
		}
	}
	if cfg.Objective == rewards.ObjectiveGRPOEntropyBonus {
		// The bonus reads each completion's summed exact token entropy under
		// the policy that sampled it (spec 1.6).
		in.EntropySums = make([]float64, n)
		for i, r := range ro.GetRollouts() {
			for _, h := range r.GetEntropy() {
				in.EntropySums[i] += float64(h)
			}
		}
	}
	cfg.RewardNames, cfg.RewardWeights = sc.GetRewardNames(), sc.GetRewardWeights()
	p, err := rewards.Prepare(in, cfg, cs.GetTau(), cs.GetBeta())
	if err != nil {
		return nil, nil, fmt.Errorf("prepare step %d: %w", step, err)
	}
	return &messages.PreparedBatch{
		Meta:       messages.DeriveMeta(rs.GetMeta()),
		RefScored:  rs,
		Weights:    p.Weights,
		Advantages: p.Advantages,
		Controller: cs,
	}, p, nil
}
