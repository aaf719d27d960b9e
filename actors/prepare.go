package actors

import (
	"fmt"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// prepare turns a reference-scored batch into what the learner trains on:
// final advantages and, for maxent_listwise, the listwise weights at the
// controller's current tau and beta (spec §1.2–1.8, rewards.Prepare). The
// reward weights are the ones the batch was scored with; the reference
// sums in rs are already length-normalised when configured, so Prepare
// does not normalise them again.
func prepare(cfg rewards.PrepareConfig, rs *messages.RefScored, cs rewards.ControllerState) (*messages.PreparedBatch, *rewards.Prepared, error) {
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
	cfg.LengthNormalizeRef = false
	cfg.RewardNames, cfg.RewardWeights = sc.GetRewardNames(), sc.GetRewardWeights() // the batch says how it was scored
	p, err := rewards.Prepare(in, cfg, cs.Tau, cs.Beta)
	if err != nil {
		return nil, nil, fmt.Errorf("prepare step %d: %w", step, err)
	}
	return &messages.PreparedBatch{
		Meta:          messages.DeriveMeta(rs.GetMeta()),
		RefScored:     rs,
		Weights:       p.Weights,
		Advantages:    p.Advantages,
		Controller:    controllerMessage(rs.GetMeta(), cs, 0),
		WeightEntropy: p.Stats.Weight.Mean,
	}, p, nil
}

// controllerMessage is the wire form of a controller state.
func controllerMessage(meta *messages.StepMeta, s rewards.ControllerState, version int64) *messages.ControllerState {
	return &messages.ControllerState{
		Meta: messages.DeriveMeta(meta), Tau: s.Tau, Beta: s.Beta, Version: version, TauLog: s.TauLog,
		TauEntropyEma: s.TauEntropyEMA, LastTauGrad: s.Meta.Controller.LastTauGrad, LastBetaGrad: s.Meta.Controller.LastBetaGrad,
	}
}
