package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// ErrBadInput is returned (wrapped) for token sequences the model cannot
// take: empty prompts, ids outside the vocabulary, sequences longer than
// the context.
var ErrBadInput = errors.New("gpu: bad input")

// Model is an immutable float32 Llama decoder: a config, one flat weight
// buffer and the policy version the weights belong to. Sample and Score only
// read the weights, so a Model is safe for concurrent use; training happens
// in a Learner, which publishes new Models with Snapshot.
type Model struct {
	cfg     Config
	version int64
	net     *net[float32]
	one     *net[float32] // net's weights, single-threaded: each shard's (shard.go)

	mu       sync.Mutex
	spare    map[[2]int]*batch[float32] // idle scoring workspaces by (B, T)
	decoders decoderPool[float32]       // idle sampling cache
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

// newModel takes ownership of w.
func newModel(cfg Config, w []float32, version int64) *Model {
	return newModelLike(cfg, w, version, nil)
}

// newModelLike is newModel for a copy w of the weights of net src (nil:
// none), whose packing it copies (packLike).
func newModelLike(cfg Config, w []float32, version int64, src *net[float32]) *Model {
	n := newNet(cfg, w, runtime.GOMAXPROCS(0))
	n.packLike(src)
	return &Model{cfg: cfg, version: version, net: n, one: n.serial(), spare: map[[2]int]*batch[float32]{}}
}

// Config returns the model's dimensions.
func (m *Model) Config() Config { return m.cfg }

// Version is the policy version of the weights (0 for a fresh model; the
// Learner counts optimiser steps).
func (m *Model) Version() int64 { return m.version }

// NumParams is the number of scalar weights.
func (m *Model) NumParams() int { return len(m.net.w.flat) }

// Weights returns a copy of the flat weight buffer (layout of TensorNames).
func (m *Model) Weights() []float32 { return append([]float32(nil), m.net.w.flat...) }

// TensorNames lists the Hugging Face tensor names in weight-buffer order.
func (m *Model) TensorNames() []string {
	l := newLayout(m.cfg)
	names := make([]string, len(l.specs))
	for i, s := range l.specs {
		names[i] = s.Name
	}
	return names
}

// Tensor returns a copy of one named tensor and its shape.
func (m *Model) Tensor(name string) ([]float32, []int, error) {
	l := newLayout(m.cfg)
	i, ok := l.index[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no tensor %q", ErrBadInput, name)
	}
	s := l.specs[i]
	return append([]float32(nil), m.net.w.flat[s.Offset:s.Offset+s.Size()]...), append([]int(nil), s.Shape...), nil
}

// workspace takes an idle workspace of shape (b, t) or makes one (if it
// fits in memory); give it back with release.
func (m *Model) workspace(b, t int) (*batch[float32], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if bt, ok := m.spare[[2]int{b, t}]; ok {
		delete(m.spare, [2]int{b, t})
		return bt, nil
	}
	shards := shardCount(b, m.net.workers)
	need := toBytes(batchBytes(m.cfg, b, t, shards, m.net.workers, false))
	if err := CheckMemory(fmt.Sprintf("scoring %d sequences × %d tokens", b, t), need); err != nil {
		return nil, err
	}
	return newBatch[float32](m.cfg, b, t, shards, m.net.workers, false), nil
}

func (m *Model) release(bt *batch[float32]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.spare) >= 2 { // bound the memory kept for odd shapes
		clear(m.spare)
	}
	m.spare[[2]int{bt.B, bt.T}] = bt
}
