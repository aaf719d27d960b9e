package tasks

import (
	"fmt"
	"math/rand/v2"
)

// Dataset is a Task that serves fixed problems (from a JSONL file, say)
// and judges them with another task's verifier.
type Dataset struct {
	problems []Problem
	verifier Task
}

var _ Task = (*Dataset)(nil)

// NewDataset serves a copy of problems, verified by verifier. If the
// verifier implements AnswerValidator, every answer is checked now and the
// first bad one is reported by its index.
func NewDataset(problems []Problem, verifier Task) (*Dataset, error) {
	if len(problems) == 0 {
		return nil, ErrEmptyDataset
	}
	if v, ok := verifier.(AnswerValidator); ok {
		for i, p := range problems {
			if err := v.ValidateAnswer(p.Answer); err != nil {
				return nil, fmt.Errorf("problem %d: %w", i, err)
			}
		}
	}
	return &Dataset{problems: append([]Problem(nil), problems...), verifier: verifier}, nil
}

// LoadDataset loads the JSONL file at path and serves it with the built-in
// task called verifier (a name or alias accepted by New).
func LoadDataset(path, verifier string, opts Options) (*Dataset, error) {
	t, err := New(verifier, opts)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	ps, err := LoadJSONLFile(path)
	if err != nil {
		return nil, err
	}
	d, err := NewDataset(ps, t)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return d, nil
}

// Name is the verifier's name, so reward functions and metrics treat a
// dataset like the task it holds.
func (d *Dataset) Name() string { return d.verifier.Name() }

// Len is the number of problems.
func (d *Dataset) Len() int { return len(d.problems) }

// At returns problem i, 0 <= i < Len().
func (d *Dataset) At(i int) Problem { return d.problems[i] }

// Generate draws a problem uniformly, with replacement.
func (d *Dataset) Generate(rng *rand.Rand) Problem {
	return d.problems[rng.IntN(len(d.problems))]
}

// Verify uses the verifier's.
func (d *Dataset) Verify(completion, answer string) Verdict {
	return d.verifier.Verify(completion, answer)
}

// Solution uses the verifier's.
func (d *Dataset) Solution(p Problem, rng *rand.Rand) (string, error) {
	return d.verifier.Solution(p, rng)
}

// Canonical uses the verifier's.
func (d *Dataset) Canonical(completion string) string {
	return d.verifier.Canonical(completion)
}

// ValidateAnswer uses the verifier's, if it has one.
func (d *Dataset) ValidateAnswer(answer string) error {
	if v, ok := d.verifier.(AnswerValidator); ok {
		return v.ValidateAnswer(answer)
	}
	return nil
}
