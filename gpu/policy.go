package gpu

import (
	"errors"
	"fmt"
)

// ErrBadInput is returned (wrapped) for token sequences the model cannot
// take: empty prompts, ids outside the vocabulary, sequences longer than
// the context.
var ErrBadInput = errors.New("gpu: bad input")

// Model is an immutable float32 Llama decoder: a config, the weights on
// a device's ModelEngine (one flat buffer in TensorNames order) and the
// policy version they belong to. Sample and Score only read the weights,
// so a Model is safe for concurrent use; training happens in a Learner,
// which publishes new Models with Snapshot.
type Model struct {
	cfg     Config
	version int64
	eng     ModelEngine
}

// NewModel returns a model with Hugging Face's initialisation drawn from
// seed (normal(0, 0.02) matrices, unit norms; same seed, same weights).
func NewModel(cfg Config, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckMemory("the model's weights", cfg.ModelBytes()); err != nil {
		return nil, err
	}
	w := make([]float32, cfg.NumParams())
	initWeights(w, cfg, seed)
	return newModel(cfg, w, 0), nil
}

// NewModelFromWeights returns a model over a copy of w, laid out as
// TensorNames lists (each tensor row-major, Hugging Face [out, in]).
func NewModelFromWeights(cfg Config, w []float32, version int64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(w) != cfg.NumParams() {
		return nil, fmt.Errorf("%w: %d weights, config needs %d", ErrBadInput, len(w), cfg.NumParams())
	}
	if err := CheckMemory("a copy of the model's weights", cfg.ModelBytes()); err != nil {
		return nil, err
	}
	return newModel(cfg, append([]float32(nil), w...), version), nil
}

// NewModelOn returns a model on dev (nil: the CPU) over w, laid out as
// TensorNames lists, at version: how a worker node puts the weights it is
// sent on its device, and a run its reference. It takes w: the CPU's
// model keeps it as its weights, a GPU's uploads it and lets it go, so the
// caller must not change it afterwards (NewModelFromWeights copies). A
// model that does not fit in the device's free memory is refused
// (ErrMemory).
func NewModelOn(dev Device, cfg Config, w []float32, version int64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(w) != cfg.NumParams() {
		return nil, fmt.Errorf("%w: %d weights, config needs %d", ErrBadInput, len(w), cfg.NumParams())
	}
	if dev == nil {
		dev = CPU{}
	}
	e, err := dev.newModelEngine(cfg, w)
	if err != nil {
		return nil, fmt.Errorf("model on %s: %w", dev.Name(), err)
	}
	return &Model{cfg: cfg, version: version, eng: e}, nil
}

// placed is a model engine that names the device its weights live on.
type placed interface{ device() Device }

// On returns m on dev (nil: the CPU): m itself when its weights live there
// already (a snapshot of a learner on dev), else a copy made there through
// the host (NewModelOn).
func (m *Model) On(dev Device) (*Model, error) {
	if dev == nil {
		dev = CPU{}
	}
	if p, ok := m.eng.(placed); ok && p.device() == dev {
		return m, nil
	}
	return NewModelOn(dev, m.cfg, m.Weights(), m.version)
}

// DType is the precision of m's matrix products: DTypeBF16 on a device
// that runs them in bf16 (DeviceOptions), else DTypeFloat32.
func (m *Model) DType() string {
	if d, ok := m.eng.(interface{ dtype() string }); ok {
		return d.dtype()
	}
	return DTypeFloat32
}

// newModel returns a CPU model over w, which it takes.
func newModel(cfg Config, w []float32, version int64) *Model {
	return &Model{cfg: cfg, version: version, eng: newCPUModel(cfg, w, nil)}
}

// Config returns the model's dimensions.
func (m *Model) Config() Config { return m.cfg }

// Version is the policy version of the weights (0 for a fresh model; the
// Learner counts optimiser steps).
func (m *Model) Version() int64 { return m.version }

// NumParams is the number of scalar weights.
func (m *Model) NumParams() int { return m.cfg.NumParams() }

// Weights returns a copy of the flat weight buffer (layout of
// TensorNames). It panics if the model's device cannot copy them out (a
// device failure, not an input error).
func (m *Model) Weights() []float32 {
	w := make([]float32, m.NumParams())
	if err := m.ReadWeights(w); err != nil {
		panic(fmt.Sprintf("gpu: read weights: %v", err))
	}
	return w
}

// ReadWeights copies the flat weight buffer (layout of TensorNames) into
// dst, which holds NumParams weights: what Weights returns, into memory
// the caller reuses (a device model's weights read out every step need
// not be allocated and first touched every step).
func (m *Model) ReadWeights(dst []float32) error {
	if len(dst) != m.NumParams() {
		return fmt.Errorf("%w: read %d weights into a buffer of %d", ErrBadInput, m.NumParams(), len(dst))
	}
	return m.eng.ReadWeights(dst, 0)
}

// HostWeights lends the flat weight buffer (layout of TensorNames) that m
// computes with, for reading only, when m keeps its weights in host
// memory (a CPU model): nothing may write it, and it is m's as long as m
// is used. ok is false for a model whose weights live on a device, whose
// weights Weights copies out.
func (m *Model) HostWeights() (w []float32, ok bool) {
	if h, ok := m.eng.(hostWeighter); ok {
		return h.hostWeights(), true
	}
	return nil, false
}

// TensorNames lists the Hugging Face tensor names in weight-buffer order.
func (m *Model) TensorNames() []string {
	l := newLayout(m.cfg)
	names := make([]string, len(l.specs))
	for i, s := range l.specs {
		names[i] = s.Name
	}
	return names
}

// ProductWeights reports, for each tensor in TensorNames order, whether
// the model reads it only as the weight of a matrix product: the q, k, v,
// o and MLP projections, and lm_head when it is not tied. Where the
// products run in bf16 (DType) only such a tensor's bf16 rounding counts,
// so it can travel as bf16 with nothing lost; the embedding (gathered in
// fp32), norms and biases cannot.
func (m *Model) ProductWeights() []bool {
	l := newLayout(m.cfg)
	out := make([]bool, len(l.specs))
	for i, s := range l.specs {
		out[i] = len(s.Shape) == 2 && s.Name != "model.embed_tokens.weight"
	}
	return out
}

// Tensor returns a copy of one named tensor and its shape.
func (m *Model) Tensor(name string) ([]float32, []int, error) {
	l := newLayout(m.cfg)
	i, ok := l.index[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no tensor %q", ErrBadInput, name)
	}
	s := l.specs[i]
	w := make([]float32, s.Size())
	if err := m.eng.ReadWeights(w, s.Offset); err != nil {
		return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	return w, append([]int(nil), s.Shape...), nil
}
