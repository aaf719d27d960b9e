package messages

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
)

// Groups lists every group index of ro, 0..P-1.
func Groups(ro *Rollouts) []int {
	out := make([]int, len(ro.GetPrompts()))
	for i := range out {
		out[i] = i
	}
	return out
}

// JoinRollouts returns one Rollouts holding the groups keep[i] of parts[i],
// in order, with header meta. Prompts and rollouts are copied whole
// (proto.Clone), so every field survives, then renumbered: prompt indices
// follow the new order. keep nil means every group of every part. A part
// with a different group size is ErrShape.
func JoinRollouts(meta *StepMeta, parts []*Rollouts, keep [][]int) (*Rollouts, error) {
	out := &Rollouts{Meta: meta}
	for pi, ro := range parts {
		if err := CheckRollouts(ro); err != nil {
			return nil, fmt.Errorf("join part %d: %w", pi, err)
		}
		if pi == 0 {
			out.NumGenerations = ro.GetNumGenerations()
		} else if ro.GetNumGenerations() != out.NumGenerations {
			return nil, fmt.Errorf("%w: join part %d has %d generations per prompt, want %d", ErrShape, pi, ro.GetNumGenerations(), out.NumGenerations)
		}
		for _, g := range groupsOf(ro, keep, pi) {
			np := int32(len(out.Prompts))
			p := proto.CloneOf(ro.GetPrompts()[g])
			p.Index = np
			out.Prompts = append(out.Prompts, p)
			for _, r := range ro.Group(g) {
				r = proto.CloneOf(r)
				r.PromptIndex = np
				out.Rollouts = append(out.Rollouts, r)
			}
		}
	}
	return out, nil
}

// JoinScored returns one Scored holding the groups keep[i] of parts[i], in
// order, with header meta: rollouts as JoinRollouts, per-completion rows
// following their groups. The parts must have been scored with the same
// reward functions and weights (else ErrShape). keep nil means every group.
func JoinScored(meta *StepMeta, parts []*Scored, keep [][]int) (*Scored, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: join of no scored parts", ErrShape)
	}
	out := proto.CloneOf(parts[0])
	out.Meta, out.Rollouts, out.Rewards, out.Truncated = meta, nil, nil, nil
	ros := make([]*Rollouts, len(parts))
	for pi, sc := range parts {
		if err := CheckScored(sc); err != nil {
			return nil, fmt.Errorf("join part %d: %w", pi, err)
		}
		if !slices.Equal(sc.GetRewardNames(), out.GetRewardNames()) || !slices.Equal(sc.GetRewardWeights(), out.GetRewardWeights()) {
			return nil, fmt.Errorf("%w: join part %d was scored with rewards %v %v, part 0 with %v %v", ErrShape, pi,
				sc.GetRewardNames(), sc.GetRewardWeights(), out.GetRewardNames(), out.GetRewardWeights())
		}
		ros[pi] = sc.GetRollouts()
		k, r := int(sc.GetRollouts().GetNumGenerations()), len(sc.GetRewardNames())
		for _, g := range groupsOf(sc.GetRollouts(), keep, pi) {
			out.Rewards = append(out.Rewards, sc.GetRewards()[g*k*r:(g+1)*k*r]...)
			out.Truncated = append(out.Truncated, sc.GetTruncated()[g*k:(g+1)*k]...)
		}
	}
	ro, err := JoinRollouts(DeriveMeta(meta), ros, keep)
	if err != nil {
		return nil, err
	}
	out.Rollouts = ro
	return out, nil
}

// SplitGroups cuts ro into consecutive parts of at most size groups each
// (size ≥ 1), each with its own header derived from ro's. A batch of at
// most size groups is one part: ro itself.
func SplitGroups(ro *Rollouts, size int) ([]*Rollouts, error) {
	return split(ro, len(ro.GetPrompts()), size, func(keep []int) (*Rollouts, error) {
		return JoinRollouts(DeriveMeta(ro.GetMeta()), []*Rollouts{ro}, [][]int{keep})
	})
}

// SplitScored cuts sc into consecutive parts of at most size groups, as
// SplitGroups.
func SplitScored(sc *Scored, size int) ([]*Scored, error) {
	return split(sc, len(sc.GetRollouts().GetPrompts()), size, func(keep []int) (*Scored, error) {
		return JoinScored(DeriveMeta(sc.GetMeta()), []*Scored{sc}, [][]int{keep})
	})
}

// split cuts whole, of n groups, into parts of at most size groups made by
// part from their group indices.
func split[M any](whole M, n, size int, part func(keep []int) (M, error)) ([]M, error) {
	if n <= size {
		return []M{whole}, nil
	}
	var parts []M
	for lo := 0; lo < n; lo += size {
		p, err := part(indices(lo, min(lo+size, n)))
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// JoinRefScored joins reference-scored parts in order: the scored batches
// as JoinScored, reference rows and sums following their completions.
func JoinRefScored(meta *StepMeta, parts []*RefScored) (*RefScored, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	scs := make([]*Scored, len(parts))
	out := proto.CloneOf(parts[0])
	out.Meta, out.Scored, out.Ref, out.RefLogpSum = meta, nil, nil, nil
	for i, rs := range parts {
		if err := CheckRefScored(rs); err != nil {
			return nil, fmt.Errorf("join part %d: %w", i, err)
		}
		scs[i] = rs.GetScored()
		for _, r := range rs.GetRef() {
			out.Ref = append(out.Ref, proto.CloneOf(r))
		}
		out.RefLogpSum = append(out.RefLogpSum, rs.GetRefLogpSum()...)
	}
	sc, err := JoinScored(DeriveMeta(meta), scs, nil)
	if err != nil {
		return nil, err
	}
	out.Scored = sc
	return out, nil
}

// SelectPrompts returns a PromptBatch of the prompts idx of pb, in that
// order, copied whole and renumbered, with a header derived from pb's.
// Each prompt keeps its own seed, so its completions do not change.
func SelectPrompts(pb *PromptBatch, idx []int) *PromptBatch {
	out := proto.CloneOf(pb)
	out.Meta, out.Prompts = DeriveMeta(pb.GetMeta()), make([]*Prompt, len(idx))
	for j, i := range idx {
		p := proto.CloneOf(pb.GetPrompts()[i])
		p.Index = int32(j)
		out.Prompts[j] = p
	}
	return out
}

// SplitPrompts cuts pb into consecutive parts of at most size prompts
// (size ≥ 1); a batch of at most size prompts is one part: pb itself.
func SplitPrompts(pb *PromptBatch, size int) []*PromptBatch {
	p := len(pb.GetPrompts())
	if p <= size {
		return []*PromptBatch{pb}
	}
	var parts []*PromptBatch
	for lo := 0; lo < p; lo += size {
		parts = append(parts, SelectPrompts(pb, indices(lo, min(lo+size, p))))
	}
	return parts
}

// groupsOf is keep[i], or every group of ro when keep is nil.
func groupsOf(ro *Rollouts, keep [][]int, i int) []int {
	if keep == nil {
		return Groups(ro)
	}
	return keep[i]
}

func indices(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}
