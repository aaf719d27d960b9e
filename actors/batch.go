package actors

import (
	"fmt"
	"math/rand/v2"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// Generation rounds of one step: round 0 is the step's batch, rounds
// 1..retryRounds re-sample groups that came back incomplete, and refill
// rounds of dynamic sampling start at refillRound.
const refillRound = 1 << 16

// promptBatch draws the n problems of (step, round) and asks for K
// completions each. Problems and sampling seed depend only on the run
// seed, the step and the round, so a resumed run sees the same batches.
func promptBatch(d *Deps, step, round int64, n int, version int64) (*messages.PromptBatch, error) {
	seed := d.Cfg.Train.Seed
	rng := rand.New(rand.NewPCG(stageSeed(seed, step, stagePrompts, uint64(round)), uint64(d.Cfg.Task.Seed)))
	problems := tasks.Batch(d.Task, rng, n)
	batchID := fmt.Sprintf("%s/%d/%d", d.RunID, step, round)
	pb := &messages.PromptBatch{
		Meta:           messages.NewMeta(d.RunID, step, batchID, version),
		NumGenerations: int32(d.Cfg.Generation.NumGenerations),
		Seed:           stageSeed(seed, step, stageGenerate, uint64(round)),
	}
	for i, p := range problems {
		ids, err := d.Prompter.Encode(p.Prompt)
		if err != nil {
			return nil, fmt.Errorf("prompt batch step %d: problem %d: %w", step, i, err)
		}
		pb.Prompts = append(pb.Prompts, &messages.Prompt{Index: int32(i), Text: p.Prompt,
			TokenIds: int32s(ids), Answer: p.Answer})
	}
	return pb, nil
}

// subPrompts returns a PromptBatch of the prompts idx of pb (renumbered)
// with its own seed.
func subPrompts(pb *messages.PromptBatch, idx []int, seed uint64) *messages.PromptBatch {
	out := &messages.PromptBatch{Meta: messages.DeriveMeta(pb.GetMeta()), NumGenerations: pb.GetNumGenerations(), Seed: seed}
	for j, i := range idx {
		p := pb.GetPrompts()[i]
		out.Prompts = append(out.Prompts, &messages.Prompt{Index: int32(j), Text: p.GetText(), TokenIds: p.GetTokenIds(), Answer: p.GetAnswer()})
	}
	return out
}

// splitPrompts cuts pb into at most n contiguous parts, one per generator.
// One part is pb itself; more parts get seeds derived from pb's.
func splitPrompts(pb *messages.PromptBatch, n int) []*messages.PromptBatch {
	p := len(pb.GetPrompts())
	n = max(min(n, p), 1)
	if n == 1 {
		return []*messages.PromptBatch{pb}
	}
	parts := make([]*messages.PromptBatch, 0, n)
	for i := range n {
		lo, hi := i*p/n, (i+1)*p/n
		parts = append(parts, subPrompts(pb, span(lo, hi), mix64(pb.GetSeed()^uint64(i+1))))
	}
	return parts
}

func span(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// groups lists every group index of a Rollouts.
func groups(ro *messages.Rollouts) []int { return span(0, len(ro.GetPrompts())) }

// concatRollouts joins groups of several Rollouts into one, in order, with
// prompts renumbered; it shares the rollouts' token slices (read only).
// The result carries meta.
func concatRollouts(meta *messages.StepMeta, parts []*messages.Rollouts, keep [][]int) *messages.Rollouts {
	if len(parts) == 1 && keep == nil {
		return parts[0]
	}
	out := &messages.Rollouts{Meta: meta}
	for pi, ro := range parts {
		k := int(ro.GetNumGenerations())
		out.NumGenerations = int32(k)
		idx := groups(ro)
		if keep != nil {
			idx = keep[pi]
		}
		for _, g := range idx {
			p := ro.GetPrompts()[g]
			np := int32(len(out.Prompts))
			out.Prompts = append(out.Prompts, &messages.Prompt{Index: np, Text: p.GetText(), TokenIds: p.GetTokenIds(), Answer: p.GetAnswer()})
			for _, r := range ro.Group(g) {
				out.Rollouts = append(out.Rollouts, &messages.Rollout{PromptIndex: np, TokenIds: r.GetTokenIds(), Logp: r.GetLogp(),
					FinishReason: r.GetFinishReason(), PolicyVersion: r.GetPolicyVersion(), GeneratorId: r.GetGeneratorId(), Text: r.GetText()})
			}
		}
	}
	return out
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
func retryGroups(ro *messages.Rollouts, idx []int, fresh *messages.Rollouts) *messages.Rollouts {
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
	return concatRollouts(messages.DeriveMeta(ro.GetMeta()), []*messages.Rollouts{ro, fresh}, [][]int{keep, freshKeep})
}

// dropIncomplete removes groups that are still incomplete; a batch with no
// group left is ErrNoCompletions.
func dropIncomplete(ro *messages.Rollouts) (*messages.Rollouts, int, error) {
	bad := incompleteGroups(ro)
	if len(bad) == 0 {
		return ro, 0, nil
	}
	if len(bad) == len(ro.GetPrompts()) {
		return nil, len(bad), fmt.Errorf("step %d: all %d groups incomplete: %w", ro.GetMeta().GetStep(), len(bad), ErrNoCompletions)
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
	return concatRollouts(messages.DeriveMeta(ro.GetMeta()), []*messages.Rollouts{ro}, [][]int{keep}), len(bad), nil
}

// splitGroups cuts ro into at most n parts of whole groups, one per reward
// evaluator; one part is ro itself.
func splitGroups(ro *messages.Rollouts, n int) []*messages.Rollouts {
	p := len(ro.GetPrompts())
	n = max(min(n, p), 1)
	if n == 1 {
		return []*messages.Rollouts{ro}
	}
	parts := make([]*messages.Rollouts, 0, n)
	for i := range n {
		parts = append(parts, concatRollouts(messages.DeriveMeta(ro.GetMeta()), []*messages.Rollouts{ro}, [][]int{span(i*p/n, (i+1)*p/n)}))
	}
	return parts
}

// concatScored joins the groups keep[i] of each Scored, in order, into one
// Scored (per-completion rows follow their groups).
func concatScored(meta *messages.StepMeta, parts []*messages.Scored, keep [][]int) (*messages.Scored, error) {
	if len(parts) == 1 && keep == nil {
		return parts[0], nil
	}
	var (
		ros       []*messages.Rollouts
		rows      [][]float64
		u, adv, q []float64
		names     []string
		weights   []float64
		roKeep    [][]int
	)
	for pi, sc := range parts {
		ro := sc.GetRollouts()
		k := int(ro.GetNumGenerations())
		names, weights = sc.GetRewardNames(), sc.GetRewardWeights()
		idx := groups(ro)
		if keep != nil {
			idx = keep[pi]
		}
		ros, roKeep = append(ros, ro), append(roKeep, idx)
		m := sc.RewardMatrix()
		for _, g := range idx {
			for i := g * k; i < (g+1)*k; i++ {
				rows = append(rows, m[i])
				u = append(u, sc.GetUtilities()[i])
				adv = append(adv, sc.GetAdvantages()[i])
				if len(sc.GetQ()) > 0 {
					q = append(q, sc.GetQ()[i])
				}
			}
		}
	}
	ro := concatRollouts(messages.DeriveMeta(meta), ros, roKeep)
	return messages.NewScored(meta, ro, names, weights, rows, u, adv, q)
}

// variedGroups lists the groups whose utilities are not all equal (the
// ones that carry a learning signal).
func variedGroups(sc *messages.Scored) ([]int, error) {
	zero, err := rewards.ZeroVarianceGroups(sc.GetUtilities(), int(sc.GetRollouts().GetNumGenerations()))
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
	return concatScored(messages.DeriveMeta(sc.GetMeta()), []*messages.Scored{sc}, [][]int{span(0, n)})
}
