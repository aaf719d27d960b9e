package gpu

import "slices"

// rowPlan lays out a batch's sequences as the rows of one forward pass,
// for every engine: the CPU engine copies it into its workspaces (one plan
// per shard), a device engine uploads it as it is. It is all that crosses
// per pass besides the temperature: token ids, positions and which rows
// are read, never activations.
//
// Sequence b occupies rows start[b]..start[b+1]-1: its prompt and
// completion tokens but the last, whose next-token distribution no loss
// reads and which no earlier position attends to (none at all without a
// completion). No row is padding: N = start[B] rows in use. A sequence
// whose prompt is its predecessor's (a group's later completions) has only
// its rows from the prompt's last token on, and reads positions
// 0..pre[b]-1 from the group's first sequence, whose rows start at
// from[b]: the prompt is computed once per group.
//
// The rows whose next token is a completion token are the need rows, in
// row order: one per completion token, sequence by sequence (token order).
// Need row k holds the log-prob of its target and the entropy of its
// next-token distribution, which go to slot slots[k] of the per-token
// arrays of the Batch layout ([B·Width]: completion token t of sequence i
// at i·Width + t); its upstream gradients come from the same slot.
type rowPlan struct {
	start     []int32 // [B+1] first row of each sequence; start[B] = N
	pre, from []int32 // [B] positions read from the group's first sequence (0: none), and that row
	tokens    []int32 // [N] input ids
	pos       []int32 // [N] position of each row within its sequence
	targets   []int32 // [N] next token of each need row (0 elsewhere)
	need      []bool  // [N] rows whose next-token distribution is read
	rows      []int32 // [K] the need rows, ascending (token order)
	slots     []int32 // [K] the [B·Width] slot of each need row's completion token
}

// planRows fills p, reusing its buffers, with the plan of seqs, which are
// sequences first.. of a batch with width completion slots per sequence
// (slots count from the batch's first sequence). With share, adjacent
// sequences with the same prompt of more than one token form a group that
// computes the prompt once.
func planRows(p *rowPlan, seqs []Sequence, first, width int, share bool) {
	B := len(seqs)
	p.start, p.pre, p.from = resize(p.start, B+1), resize(p.pre, B), resize(p.from, B)
	p.tokens, p.pos, p.targets, p.need = p.tokens[:0], p.pos[:0], p.targets[:0], p.need[:0]
	p.rows, p.slots = p.rows[:0], p.slots[:0]
	r, owner := 0, -1 // owner: the group's first sequence, -1 for none
	for b, s := range seqs {
		p.start[b], p.pre[b], p.from[b] = int32(r), 0, 0
		n, pl := 0, len(s.Prompt)
		if len(s.Completion) > 0 {
			n = pl + len(s.Completion) - 1
		}
		if share && n > 0 && pl > 1 && owner >= 0 && slices.Equal(s.Prompt, seqs[owner].Prompt) {
			p.pre[b], p.from[b] = int32(pl-1), p.start[owner]
		} else if n > 0 {
			owner = b
		} else {
			owner = -1 // a group's sequences are adjacent
		}
		pre := int(p.pre[b])
		for t := pre; t < n; t++ {
			id, target, need := 0, 0, t >= pl-1
			if t < pl {
				id = s.Prompt[t]
			} else {
				id = s.Completion[t-pl]
			}
			if need {
				target = s.Completion[t+1-pl]
				p.rows = append(p.rows, int32(r+t-pre))
				p.slots = append(p.slots, int32((first+b)*width+t+1-pl))
			}
			p.tokens, p.pos = append(p.tokens, int32(id)), append(p.pos, int32(t))
			p.targets, p.need = append(p.targets, int32(target)), append(p.need, need)
		}
		r += n - pre
	}
	p.start[B] = int32(r)
}

// resize returns s with length n, reusing its array when it is large
// enough.
func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// completionRow is the row whose output scores completion token t of
// sequence b (s).
func (p *rowPlan) completionRow(b int, s Sequence, t int) int {
	return int(p.start[b]) + len(s.Prompt) + t - 1 - int(p.pre[b])
}

// tokenScores reads each sequence's completion scores from the per-token
// arrays lp and ent of the Batch layout (width slots per sequence). The
// scores alias lp and ent.
func tokenScores(seqs []Sequence, width int, lp, ent []float64) []TokenScores {
	out := make([]TokenScores, len(seqs))
	for i, s := range seqs {
		lo, hi := i*width, i*width+len(s.Completion)
		out[i] = TokenScores{LogProbs: lp[lo:hi:hi], Entropies: ent[lo:hi:hi]}
	}
	return out
}
