package gpu

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
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

// TestModelOnCPU: a CPU model is on the CPU already (On returns it); its
// products are float32.
func TestModelOnCPU(t *testing.T) {
	cfg, _ := Preset("tiny")
	m, err := NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []Device{CPU{}, nil} {
		if got, err := m.On(dev); got != m || err != nil {
			t.Errorf("On(%v) = %p, %v; want the model itself", dev, got, err)
		}
	}
	if m.DType() != DTypeFloat32 {
		t.Errorf("DType %q", m.DType())
	}
}

// TestProductWeights: the projections and an untied lm_head are product
// weights; the embedding, the norms and Qwen2's biases are not.
func TestProductWeights(t *testing.T) {
	cfg, _ := Preset("tiny")
	cfg.Arch, cfg.TieEmbeddings = ArchQwen2, false
	m, err := NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	product := m.ProductWeights()
	for i, name := range m.TensorNames() {
		want := strings.HasSuffix(name, "_proj.weight") || name == "lm_head.weight"
		if product[i] != want {
			t.Errorf("%s: product weight %v, want %v", name, product[i], want)
		}
	}
}

// TestReadWeights: ReadWeights fills a buffer with what Weights returns,
// and refuses one of another length with ErrBadInput.
func TestReadWeights(t *testing.T) {
	cfg, _ := Preset("tiny")
	m, err := NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, m.NumParams())
	if err := m.ReadWeights(dst); err != nil || !slices.Equal(dst, m.Weights()) {
		t.Errorf("ReadWeights: %v, or weights other than Weights'", err)
	}
	for _, n := range []int{0, m.NumParams() - 1, m.NumParams() + 1} {
		if err := m.ReadWeights(make([]float32, n)); !errors.Is(err, ErrBadInput) {
			t.Errorf("a buffer of %d: %v, want ErrBadInput", n, err)
		}
	}
}
