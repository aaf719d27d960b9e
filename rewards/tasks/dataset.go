package tasks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
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

// Source says where a data set comes from and how it is split into
// training and held-out evaluation rows.
type Source struct {
	// Path is the data file: JSONL (.jsonl, .ndjson, .json) or Parquet
	// (.parquet).
	Path string
	// Fields names the prompt and answer columns.
	Fields Fields
	// EvalPath is a separate evaluation file (same format rules and
	// fields); "" for none.
	EvalPath string
	// EvalFraction, in [0, 1), is the share of Path's rows held out for
	// evaluation when EvalPath is ""; 0 holds out none.
	EvalFraction float64
	// Seed orders the rows before the held-out share is cut off.
	Seed uint64
}

// Data file formats by extension.
var dataFormats = map[string]func(string, Fields) ([]Problem, error){
	".jsonl": LoadJSONLFile, ".ndjson": LoadJSONLFile, ".json": LoadJSONLFile, ".parquet": LoadParquetFile,
}

// LoadRows reads a data file, its format told by its extension.
func LoadRows(path string, fields Fields) ([]Problem, error) {
	load, ok := dataFormats[strings.ToLower(filepath.Ext(path))]
	if !ok {
		return nil, fmt.Errorf("dataset %s: unknown format %q (want .jsonl, .ndjson, .json or .parquet)", path, filepath.Ext(path))
	}
	return load(path, fields)
}

// OpenDatasets loads src's training rows and its held-out evaluation rows
// (nil when src has neither EvalPath nor EvalFraction), both served with
// the built-in task called verifier. The held-out rows are the last
// ceil(EvalFraction·n) of the rows shuffled with Seed; both parts must be
// non-empty.
func OpenDatasets(src Source, verifier string, opts Options) (train, eval *Dataset, err error) {
	t, err := New(verifier, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset %s: %w", src.Path, err)
	}
	rows, err := LoadRows(src.Path, src.Fields)
	if err != nil {
		return nil, nil, err
	}
	var held []Problem
	switch {
	case src.EvalPath != "":
		if held, err = LoadRows(src.EvalPath, src.Fields); err != nil {
			return nil, nil, err
		}
	case src.EvalFraction > 0:
		if rows, held, err = splitRows(rows, src.EvalFraction, src.Seed); err != nil {
			return nil, nil, fmt.Errorf("dataset %s: %w", src.Path, err)
		}
	}
	if train, err = NewDataset(rows, t); err != nil {
		return nil, nil, fmt.Errorf("dataset %s: %w", src.Path, err)
	}
	if held == nil {
		return train, nil, nil
	}
	if eval, err = NewDataset(held, t); err != nil {
		name := src.EvalPath
		if name == "" {
			name = src.Path + " (held-out rows)"
		}
		return nil, nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	return train, eval, nil
}

// splitRows shuffles rows with seed and cuts off the last
// ceil(fraction·n) as the held-out part.
func splitRows(rows []Problem, fraction float64, seed uint64) (train, held []Problem, err error) {
	if !(fraction > 0 && fraction < 1) {
		return nil, nil, fmt.Errorf("eval fraction %g: want a value in (0, 1)", fraction)
	}
	n := len(rows)
	k := int(math.Ceil(fraction * float64(n)))
	if k >= n {
		return nil, nil, fmt.Errorf("eval fraction %g of %d rows leaves no training rows", fraction, n)
	}
	shuffled := append([]Problem(nil), rows...)
	rng := rand.New(rand.NewPCG(seed, 0x686f6c646f7574)) // "holdout"
	rng.Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	return shuffled[:n-k], shuffled[n-k:], nil
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
