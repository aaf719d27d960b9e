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

// Score returns the per-token log-probs and entropies of every completion
// under the model at the given temperature (logits divided by it, spec
// §1.9a), in input order. It is the learner's and the reference scorer's
// forward pass, batched.
func (m *Model) Score(seqs []Sequence, temperature float64) ([]TokenScores, error) {
	if err := checkScore(m.cfg, seqs, temperature); err != nil {
		return nil, err
	}
	return scoreOn(m.eng.Score, seqs, temperature)
}

// scoreOn scores seqs (valid, at a valid temperature) with an engine's
// Score.
func scoreOn(score func(b Batch, temperature float64, lp, ent []float64) error, seqs []Sequence, temperature float64) ([]TokenScores, error) {
	b := Batch{Seqs: seqs}
	w := b.width()
	lp, ent := make([]float64, len(seqs)*w), make([]float64, len(seqs)*w)
	if err := score(b, temperature, lp, ent); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	return tokenScores(seqs, w, lp, ent), nil
}

// checkScore validates the arguments of Score.
func checkScore(c Config, seqs []Sequence, temperature float64) error {
	if !(temperature > 0) {
		return fmt.Errorf("%w: temperature %g must be > 0", ErrBadInput, temperature)
	}
	if err := checkSequences(c, seqs); err != nil {
		return fmt.Errorf("score: %w", err)
	}
	return nil
}

// scoreInto runs the forward pass of n over seqs in workspace bt (shaped
// for them) and writes their scores to dst.
func scoreInto[F Float](dst []TokenScores, n *net[F], bt *batch[F], seqs []Sequence, temperature float64) {
	b := Batch{Seqs: seqs}
	w := b.width()
	lp, ent := make([]float64, len(seqs)*w), make([]float64, len(seqs)*w)
	bt.forward(n, b, temperature, lp, ent)
	copy(dst, tokenScores(seqs, w, lp, ent))
}
