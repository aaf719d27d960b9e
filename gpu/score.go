package gpu

import "fmt"

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

// load writes seqs into the workspace (right-padded with PAD id 0, which the
// causal mask keeps out of every real position) and marks, for each row whose
// next token is a completion token, that token as the row's target.
func (a *acts[F]) load(seqs []Sequence) {
	clear(a.tokens)
	clear(a.targets)
	clear(a.need)
	for b, s := range seqs {
		row := a.tokens[b*a.T : (b+1)*a.T]
		for p, id := range s.Prompt {
			row[p] = int32(id)
		}
		for t, id := range s.Completion {
			row[len(s.Prompt)+t] = int32(id)
			a.targets[b*a.T+len(s.Prompt)+t-1] = int32(id)
			a.need[b*a.T+len(s.Prompt)+t-1] = true
		}
	}
}

// completionRow is the workspace row whose output scores completion token t.
func (a *acts[F]) completionRow(b int, s Sequence, t int) int { return b*a.T + len(s.Prompt) + t - 1 }

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
