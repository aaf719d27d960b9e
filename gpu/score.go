package gpu

import (
	"fmt"
	"slices"
)

// Sequence is one prompt and its completion as token ids. The model scores
// the completion tokens: the log-prob of Completion[t] is read from the
// position just before it, so a prompt needs at least one token (BOS).
type Sequence struct {
	Prompt     []int
	Completion []int
}

// TokenScores holds, per completion token, the log-prob of that token and
// the exact entropy of the next-token distribution it was drawn from, both at
// the scoring temperature.
type TokenScores struct {
	LogProbs  []float64
	Entropies []float64
}

// scoreChunk bounds the sequences scored in one forward pass.
const scoreChunk = 128

// checkSequences validates token ids and lengths against the config.
func checkSequences(c Config, seqs []Sequence) error {
	for i, s := range seqs {
		if len(s.Prompt) == 0 {
			return fmt.Errorf("%w: sequence %d: empty prompt (start it with BOS)", ErrBadInput, i)
		}
		if n := len(s.Prompt) + len(s.Completion); n > c.Context {
			return fmt.Errorf("%w: sequence %d: %d tokens exceed the context of %d", ErrBadInput, i, n, c.Context)
		}
		for _, part := range [][]int{s.Prompt, s.Completion} {
			for _, id := range part {
				if id < 0 || id >= c.Vocab {
					return fmt.Errorf("%w: sequence %d: token id %d outside vocabulary [0, %d)", ErrBadInput, i, id, c.Vocab)
				}
			}
		}
	}
	return nil
}

// paddedLen is the workspace length for seqs: the longest sequence rounded
// up to a multiple of 8 (so few distinct shapes occur), capped at the context.
func paddedLen(c Config, seqs []Sequence) int {
	t := 1
	for _, s := range seqs {
		t = max(t, len(s.Prompt)+len(s.Completion))
	}
	return min((t+7)/8*8, c.Context)
}

// load packs seqs into the workspace: sequence b's rows are its prompt and
// completion tokens but the last, whose next-token distribution no loss
// reads and which no earlier position attends to (none at all without a
// completion), one after another from row start[b]. Each row whose next
// token is a completion token has it as its target and is marked needed.
// No row is padding: the passes run on the N rows in use only.
//
// With share, adjacent sequences with the same prompt (a group of
// completions) form a group: the later ones have rows from the prompt's
// last token on and read the positions before it from the first's rows
// (pre, from), which computes the prompt once instead of once per
// completion.
func (a *acts[F]) load(seqs []Sequence, share bool) {
	r, owner := 0, -1 // owner: the group's first sequence, -1 for none
	for b, s := range seqs {
		a.start[b], a.pre[b], a.from[b] = int32(r), 0, 0
		n, p := 0, len(s.Prompt)
		if len(s.Completion) > 0 {
			n = p + len(s.Completion) - 1
		}
		if share && n > 0 && p > 1 && owner >= 0 && slices.Equal(s.Prompt, seqs[owner].Prompt) {
			a.pre[b], a.from[b] = int32(p-1), a.start[owner]
		} else if n > 0 {
			owner = b
		} else {
			owner = -1 // a group's sequences are adjacent
		}
		pre := int(a.pre[b])
		for t := pre; t < n; t++ {
			i, id, need := r+t-pre, 0, t >= p-1
			if t < p {
				id = s.Prompt[t]
			} else {
				id = s.Completion[t-p]
			}
			a.tokens[i], a.pos[i], a.need[i], a.targets[i] = int32(id), int32(t), need, 0
			if need {
				a.targets[i] = int32(s.Completion[t+1-p])
			}
		}
		r += n - pre
	}
	clear(a.pre[len(seqs):])
	clear(a.from[len(seqs):])
	for b := len(seqs); b <= a.B; b++ {
		a.start[b] = int32(r)
	}
	a.N = r
}

// completionRow is the workspace row whose output scores completion token t.
func (a *acts[F]) completionRow(b int, s Sequence, t int) int {
	return int(a.start[b]) + len(s.Prompt) + t - 1 - int(a.pre[b])
}

// Score returns the per-token log-probs and entropies of every completion
// under the model at the given temperature (logits divided by it, spec
// §1.9a), in input order. It is the learner's and the reference scorer's
// forward pass, batched.
func (m *Model) Score(seqs []Sequence, temperature float64) ([]TokenScores, error) {
	if !(temperature > 0) {
		return nil, fmt.Errorf("%w: temperature %g must be > 0", ErrBadInput, temperature)
	}
	if err := checkSequences(m.cfg, seqs); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	out := make([]TokenScores, len(seqs))
	for lo := 0; lo < len(seqs); lo += scoreChunk {
		chunk := seqs[lo:min(lo+scoreChunk, len(seqs))]
		bt, err := m.workspace(len(chunk), paddedLen(m.cfg, chunk))
		if err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
		scoreInto(out[lo:], passNet(m.net, m.one, bt), bt, chunk, temperature)
		m.release(bt)
	}
	return out, nil
}

// scoreInto runs the forward pass of n over seqs in workspace bt (shaped
// for them) and writes their scores to dst.
func scoreInto[F Float](dst []TokenScores, n *net[F], bt *batch[F], seqs []Sequence, temperature float64) {
	bt.load(seqs)
	bt.each(func(_ int, a *acts[F]) { n.forward(a, temperature) })
	for b, s := range seqs {
		dst[b] = bt.gather(b, s, n.cfg.Vocab)
	}
}

// gather reads the completion scores of sequence b after a forward pass.
func (bt *batch[F]) gather(b int, s Sequence, v int) TokenScores {
	ts := TokenScores{LogProbs: make([]float64, len(s.Completion)), Entropies: make([]float64, len(s.Completion))}
	for t, id := range s.Completion {
		a, r := bt.row(b, s, t)
		ts.LogProbs[t] = float64(a.logp[r*v+id])
		ts.Entropies[t] = float64(a.ent[r])
	}
	return ts
}
