package actors

import (
	"fmt"
	"math/rand/v2"

	"github.com/mgrpo/mgrpo/internal/seeds"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// Generation rounds of one step: round 0 is the step's batch, rounds
// 1..retryRounds re-sample groups that came back incomplete, and refill
// rounds of dynamic sampling start at refillRound.
const refillRound = 1 << 16

// promptBatch draws the n problems of (step, round) of run runID and asks
// for K completions each. Problems depend only on the run seed, the step
// and the round, so a resumed run sees the same batches; each prompt's
// sampling seed also on its slot, so its completions do not depend on
// which generator draws them or with which other prompts.
func promptBatch(s stepSettings, runID string, step, round int64, n int, version int64) (*messages.PromptBatch, error) {
	rng := rand.New(rand.NewPCG(stageSeed(s.seed, step, stagePrompts, uint64(round)), uint64(s.taskSeed)))
	problems := tasks.Batch(s.task, rng, n)
	batchID := fmt.Sprintf("%s/%d/%d", runID, step, round)
	pb := &messages.PromptBatch{
		Meta:           messages.NewMeta(runID, step, batchID, version),
		NumGenerations: int32(s.group),
	}
	for i, p := range problems {
		ids, err := s.prompter.Encode(p.Prompt)
		if err != nil {
			return nil, fmt.Errorf("prompt batch step %d: problem %d: %w", step+1, i, err)
		}
		pb.Prompts = append(pb.Prompts, &messages.Prompt{Index: int32(i), Text: p.Prompt,
			TokenIds: int32s(ids), Answer: p.Answer})
	}
	return reseed(pb, stageSeed(s.seed, step, stageGenerate, uint64(round))), nil
}

// reseed gives prompt i of pb (a batch this stage just made) the sampling
// seed (seed, i).
func reseed(pb *messages.PromptBatch, seed uint64) *messages.PromptBatch {
	for i, p := range pb.GetPrompts() {
		p.Seed = seeds.Of(seed, uint64(i))
	}
	return pb
}

// promptsOf rebuilds the PromptBatch a Rollouts answers (for retries).
func promptsOf(ro *messages.Rollouts) *messages.PromptBatch {
	return &messages.PromptBatch{Meta: messages.DeriveMeta(ro.GetMeta()), Prompts: ro.GetPrompts(), NumGenerations: ro.GetNumGenerations()}
}

// incompleteGroups lists the groups with a completion that has no token
// (nothing to train on), the ones a retry round re-samples.
func incompleteGroups(ro *messages.Rollouts) []int {
	var out []int
	for g := range ro.GetPrompts() {
		for _, r := range ro.Group(g) {
			if len(r.GetTokenIds()) == 0 {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// retryGroups replaces each group idx[j] of ro by group j of fresh when
// that one is complete; replaced groups move to the end of the batch.
func retryGroups(ro *messages.Rollouts, idx []int, fresh *messages.Rollouts) (*messages.Rollouts, error) {
	bad := map[int]bool{}
	for _, j := range incompleteGroups(fresh) {
		bad[j] = true
	}
	replaced := map[int]bool{}
	var freshKeep []int
	for j, g := range idx {
		if !bad[j] {
			replaced[g] = true
			freshKeep = append(freshKeep, j)
		}
	}
	var keep []int
	for g := range ro.GetPrompts() {
		if !replaced[g] {
			keep = append(keep, g)
		}
	}
	return messages.JoinRollouts(messages.DeriveMeta(ro.GetMeta()), []*messages.Rollouts{ro, fresh}, [][]int{keep, freshKeep})
}

// dropIncomplete removes groups that are still incomplete; a batch with no
// group left is ErrNoCompletions.
func dropIncomplete(ro *messages.Rollouts) (*messages.Rollouts, error) {
	bad := incompleteGroups(ro)
	if len(bad) == 0 {
		return ro, nil
	}
	if len(bad) == len(ro.GetPrompts()) {
		return nil, fmt.Errorf("step %d: all %d groups incomplete: %w", ro.GetMeta().GetStep()+1, len(bad), ErrNoCompletions) // meta step n is the run's n+1
	}
	isBad := map[int]bool{}
	for _, g := range bad {
		isBad[g] = true
	}
	var keep []int
	for g := range ro.GetPrompts() {
		if !isBad[g] {
			keep = append(keep, g)
		}
	}
	return messages.JoinRollouts(messages.DeriveMeta(ro.GetMeta()), []*messages.Rollouts{ro}, [][]int{keep})
}

// variedGroups lists the groups whose utilities (before any entropy bonus,
// rewards.BaseUtilities) are not all equal: the ones dynamic sampling
// keeps, because they carry a learning signal.
func variedGroups(sc *messages.Scored, zeroTruncated bool) ([]int, error) {
	u, err := rewards.BaseUtilities(transpose(sc.RewardMatrix(), len(sc.GetRewardNames())), sc.GetRewardWeights(), sc.GetTruncated(), zeroTruncated)
	if err != nil {
		return nil, err
	}
	zero, err := rewards.ZeroVarianceGroups(u, int(sc.GetRollouts().GetNumGenerations()))
	if err != nil {
		return nil, err
	}
	var out []int
	for g, z := range zero {
		if !z {
			out = append(out, g)
		}
	}
	return out, nil
}

// firstGroups keeps the first n groups of sc.
func firstGroups(sc *messages.Scored, n int) (*messages.Scored, error) {
	if len(sc.GetRollouts().GetPrompts()) <= n {
		return sc, nil
	}
	return messages.JoinScored(messages.DeriveMeta(sc.GetMeta()), []*messages.Scored{sc}, [][]int{indices(0, n)})
}

// indices is lo, lo+1, ..., hi-1.
func indices(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// transpose turns [rollout][function] rows into [function][rollout].
func transpose(rows [][]float64, f int) [][]float64 {
	out := make([][]float64, f)
	for j := range out {
		out[j] = make([]float64, len(rows))
		for i, row := range rows {
			out[j][i] = row[j]
		}
	}
	return out
}
