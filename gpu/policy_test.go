package gpu

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// modelOnMatches checks NewModelOn on dev against the CPU model it copies:
// its version, its weights read back bit for bit, its scores within tol
// (relative to max(1, |x|)), and a wrong number of weights refused.
func modelOnMatches(t *testing.T, dev Device, tol float64) {
	t.Helper()
	cfg, _ := Preset("tiny")
	src, err := NewModel(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	w := src.Weights()
	m, err := NewModelOn(dev, cfg, slices.Clone(w), 7)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 7 || m.Config() != cfg {
		t.Errorf("version %d, config %+v; want 7, %+v", m.Version(), m.Config(), cfg)
	}
	if !slices.Equal(m.Weights(), w) {
		t.Error("weights read back differ from those given")
	}
	seqs := randomSeqs(rand.New(rand.NewPCG(5, 6)), 6, 5, 7, cfg.Vocab)
	want, err := src.Score(seqs, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Score(seqs, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		for j := range want[i].LogProbs {
			if !closeTo(got[i].LogProbs[j], want[i].LogProbs[j], tol) || !closeTo(got[i].Entropies[j], want[i].Entropies[j], tol) {
				t.Fatalf("sequence %d token %d: log-prob %g entropy %g, CPU %g %g", i, j,
					got[i].LogProbs[j], got[i].Entropies[j], want[i].LogProbs[j], want[i].Entropies[j])
			}
		}
	}
	if _, err := NewModelOn(dev, cfg, w[:10], 0); !errors.Is(err, ErrBadInput) {
		t.Errorf("10 weights: error %v, want ErrBadInput", err)
	}
}

// TestNewModelOn: on the CPU (and with no device, which is the CPU) the
// model scores exactly as the one its weights came from.
func TestNewModelOn(t *testing.T) {
	modelOnMatches(t, CPU{}, 0)
	modelOnMatches(t, nil, 0)
}
