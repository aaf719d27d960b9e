package gpu

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/gpu/optim"
)

// ErrNonFinite is returned (wrapped) when a loss or gradient norm is NaN or
// infinite; the learner then leaves the weights unchanged (skip the batch).
var ErrNonFinite = errors.New("gpu: non-finite loss or gradient")

// ErrBadUpdate is returned (wrapped) when an optimiser step left a weight
// or an optimiser moment non-finite, or changed the weights by more than
// LearnerConfig.MaxUpdateRatio times their norm. The learner has then
// rolled the step back: weights, moments, step count and version are as
// before it (skip the batch).
var ErrBadUpdate = errors.New("gpu: non-finite or exploding update")

// Batch is a padded batch for the learner. Per-token slices handed to the
// loss function have Width slots per sequence: completion token t of
// sequence i is at index i·Width + t (gpu/loss's layout), and slots past a
// completion's end hold zeros (mask them).
type Batch struct {
	Seqs []Sequence
	// Width is the number of completion slots per sequence; 0 means the
	// longest completion of the batch.
	Width int
}

// Mask returns the [N·Width] 0/1 completion mask of the batch.
func (b Batch) Mask() []float64 {
	w := b.width()
	m := make([]float64, len(b.Seqs)*w)
	for i, s := range b.Seqs {
		for t := range s.Completion {
			m[i*w+t] = 1
		}
	}
	return m
}

func (b Batch) width() int {
	if b.Width > 0 {
		return b.Width
	}
	w := 0
	for _, s := range b.Seqs {
		w = max(w, len(s.Completion))
	}
	return w
}

// LossFunc computes a loss from per-token log-probs lp and entropies ent
// ([N·Width] each, layout of Batch and gpu/loss) and returns it with its
// gradients (loss.Result: DLogp required, DEntropy nil when the loss has no
// entropy term). lp and ent are the learner's, reused by its next step:
// valid until the function returns (copy what it keeps), and not to be
// returned as gradients. Any objective plugs in as a closure, e.g.
//
//	func(lp, ent []float64) (loss.Result, error) { return loss.Policy(cfg, lb, lp) }
type LossFunc func(lp, ent []float64) (loss.Result, error)

// LossBatch returns the gpu/loss batch skeleton of b: N, T = Width and the
// completion mask; the caller adds advantages, old and reference log-probs.
func (b Batch) LossBatch() loss.Batch {
	return loss.Batch{N: len(b.Seqs), T: b.width(), Mask: b.Mask()}
}

// LearnerConfig holds the optimiser settings of a Learner.
type LearnerConfig struct {
	// LR, Beta1, Beta2, Eps and WeightDecay configure AdamW (PyTorch's
	// meaning); Schedule gives the learning rate per step (Base = LR when
	// Schedule.Kind is empty: constant).
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Schedule                           optim.Schedule
	// MaxGradNorm clips the global gradient norm (0 = no clipping).
	MaxGradNorm float64
	// MaxUpdateRatio refuses a step whose update norm ‖Δw‖ would exceed
	// this multiple of the weights' norm ‖w‖ before it (0 = no limit): the
	// step returns ErrBadUpdate and nothing changes. A step that would
	// leave any weight or moment non-finite is always refused.
	MaxUpdateRatio float64
	// MicroBatch is how many sequences one forward and backward pass
	// takes (gradient accumulation); 0, or at least the batch's size,
	// means the whole batch in one pass. The step stays exact: every
	// micro-batch is run forward for the whole batch's log-probs and
	// entropies, the loss sees them all at once, and each micro-batch is
	// then run forward again and backward with its share of the loss's
	// gradients, summed before one clip and one update. Memory for
	// activations follows the micro-batch; the time is about one extra
	// forward pass.
	MicroBatch int
	// Device is where the learner's engine runs (nil: the CPU). The
	// learner does not close it.
	Device Device
}

// DefaultLearnerConfig is AdamW(1e-3, 0.9, 0.999, 1e-8, weight decay 0.01),
// constant rate, clipping at norm 1, updates of at most the weights' norm.
func DefaultLearnerConfig() LearnerConfig {
	return LearnerConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1, MaxUpdateRatio: 1}
}

// StepStats reports one learner step.
type StepStats struct {
	Loss        float64
	GradNorm    float64 // global norm before clipping
	LR          float64
	MeanEntropy float64 // mean entropy over completion tokens
	Tokens      int     // completion tokens in the batch
	Sequences   int
	Version     int64      // policy version after the step
	LossStats   loss.Stats // the loss function's diagnostics
	// Forward (and the loss), Backward and Optimizer (clipping and AdamW)
	// are how long the phases of the step took.
	Forward, Backward, Optimizer time.Duration
}

// Learner trains a copy of a model's weights on a device's Engine:
// forward over a packed batch, a caller-given loss on the host, backward,
// global-norm clipping and AdamW. The engine keeps one workspace per
// batch shape, so steady-state steps do not allocate activations. A
// Learner is not safe for concurrent use.
type Learner struct {
	cfg     Config
	lc      LearnerConfig
	eng     Engine
	hyper   *optim.AdamW // lc's AdamW settings, validated: saved with the engine's optimiser state
	version int64
	arrays  []float64 // the steps' per-token arrays (stepArrays)
}

// NewLearner returns a learner starting from m's weights (copied) at
// version m.Version(), on lc.Device.
func NewLearner(m *Model, lc LearnerConfig) (*Learner, error) {
	if lc.Schedule.Kind == "" {
		lc.Schedule = optim.Schedule{Kind: optim.Constant, Base: lc.LR}
	}
	hyper, err := optim.NewAdamW(lc.LR, lc.Beta1, lc.Beta2, lc.Eps, lc.WeightDecay)
	if err != nil {
		return nil, fmt.Errorf("new learner: %w", err)
	}
	switch {
	case lc.MaxGradNorm < 0 || math.IsNaN(lc.MaxGradNorm):
		return nil, fmt.Errorf("new learner: max grad norm %g must be ≥ 0", lc.MaxGradNorm)
	case !(lc.MaxUpdateRatio >= 0):
		return nil, fmt.Errorf("new learner: max update ratio %g must be ≥ 0", lc.MaxUpdateRatio)
	case lc.MicroBatch < 0:
		return nil, fmt.Errorf("new learner: micro-batch %d must be ≥ 0", lc.MicroBatch)
	}
	dev := lc.Device
	if dev == nil {
		dev = CPU{}
	}
	eng, err := dev.newEngine(m.cfg, modelWeights(m), lc)
	if err != nil {
		return nil, fmt.Errorf("new learner: %w", err)
	}
	return &Learner{cfg: m.cfg, lc: lc, eng: eng, hyper: hyper, version: m.version}, nil
}

// Config returns the model dimensions the learner trains.
func (l *Learner) Config() Config { return l.cfg }

// Version is the policy version of the current weights: the starting
// model's version plus the optimiser steps taken.
func (l *Learner) Version() int64 { return l.version }

// reserver is an engine whose workspace lives apart from the host's
// memory and can be sized before a pass (the CUDA engine's, in GPU
// memory).
type reserver interface {
	reserve(b Batch) error
}

// Reserve sizes the learner's workspace for passes shaped like b (b
// whole, or its first LearnerConfig.MicroBatch sequences), so that a
// batch that cannot fit is refused now, with one line wrapping ErrMemory,
// instead of at its first step; no pass within that shape allocates
// again. A CPU learner has nothing to reserve: its memory is the host's,
// which a run checks before it starts.
func (l *Learner) Reserve(b Batch) error {
	r, ok := l.eng.(reserver)
	if !ok || len(b.Seqs) == 0 {
		return nil
	}
	if mb := l.lc.MicroBatch; mb > 0 && mb < len(b.Seqs) {
		b.Seqs = b.Seqs[:mb]
	}
	return r.reserve(b)
}

// Snapshot returns the current weights as an immutable Model (a copy, on
// the learner's device) carrying the current version, for generators and
// checkpoints. It panics if the device cannot make the copy (a device
// failure, not an input error).
func (l *Learner) Snapshot() *Model {
	e, err := l.eng.Snapshot()
	if err != nil {
		panic(fmt.Sprintf("gpu: learner snapshot: %v", err))
	}
	return &Model{cfg: l.cfg, version: l.version, eng: e}
}

// SetWeights replaces the learner's weights and version by a copy of m's
// (same config required); the optimiser state is kept.
func (l *Learner) SetWeights(m *Model) error {
	if m.cfg != l.cfg {
		return fmt.Errorf("set weights: %w: model config %+v, learner %+v", ErrBadInput, m.cfg, l.cfg)
	}
	if err := l.eng.SetWeights(modelWeights(m)); err != nil {
		return fmt.Errorf("set weights: %w", err)
	}
	l.version = m.version
	return nil
}

// Score is Model.Score on the learner's current weights.
func (l *Learner) Score(seqs []Sequence, temperature float64) ([]TokenScores, error) {
	if err := checkScore(l.cfg, seqs, temperature); err != nil {
		return nil, err
	}
	if len(seqs) == 0 {
		return []TokenScores{}, nil
	}
	return scoreOn(l.eng.Score, seqs, temperature)
}

// Step runs one update: per-token log-probs and entropies of the batch's
// completions at the given temperature, the loss and its gradients from
// lossFn, backward, global-norm clipping and one AdamW step at the
// scheduled learning rate, in micro-batches of LearnerConfig.MicroBatch
// sequences. On an error (bad batch, loss error, non-finite loss or
// gradient, refused update) the weights are unchanged.
func (l *Learner) Step(b Batch, temperature float64, lossFn LossFunc) (StepStats, error) {
	if err := l.checkBatch(b, temperature); err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	start := time.Now()
	lp, ent, scratch := l.stepArrays(len(b.Seqs) * b.width())
	g, err := forwardLoss(l.eng, b, temperature, l.lc.MicroBatch, lossFn, lp, ent)
	if err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	st := tokenStats(b, ent)
	forwardEnd := time.Now()
	if err := backprop(l.eng, b, temperature, l.lc.MicroBatch, g, scratch); err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	backwardEnd := time.Now()
	if st.GradNorm, err = l.eng.ClipGradNorm(l.lc.MaxGradNorm); err != nil {
		return StepStats{}, fmt.Errorf("learner step: clip: %w", err)
	}
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return StepStats{}, fmt.Errorf("learner step: gradient norm %g: %w", st.GradNorm, ErrNonFinite)
	}
	// The schedule counts this optimiser's steps (restored by LoadOptimizer),
	// not the policy version, which may include a warm start's steps.
	st.Loss, st.LR, st.LossStats = g.Loss, l.lc.Schedule.LR(l.eng.Steps()), g.Stats
	if err := l.eng.Update(st.LR); err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	l.version++
	st.Version = l.version
	st.Forward, st.Backward, st.Optimizer = forwardEnd.Sub(start), backwardEnd.Sub(forwardEnd), time.Since(backwardEnd)
	return st, nil
}

// stepArrays returns a step's per-token arrays for n slots: the loss's
// inputs lp and ent, and scratch (2n) for backprop. They are the
// learner's, reused by every step.
func (l *Learner) stepArrays(n int) (lp, ent, scratch []float64) {
	if cap(l.arrays) < 4*n {
		l.arrays = make([]float64, 4*n)
	}
	a := l.arrays[:4*n]
	return a[:n:n], a[n : 2*n : 2*n], a[2*n:]
}

// passes is the part of an Engine that a step's forward and backward
// passes drive (the float64 CPU trainer has it too, for the tests).
type passes interface {
	Forward(b Batch, temperature float64, lp, ent []float64) error
	Score(b Batch, temperature float64, lp, ent []float64) error
	Backward(dLogp, dEntropy []float64) error
	ZeroGrad()
}

// microBatches cuts b into batches of at most micro sequences (0: one),
// each with b's width, and returns them with the index of each one's
// first sequence.
func microBatches(b Batch, micro int) (parts []Batch, first []int) {
	w, n := b.width(), len(b.Seqs)
	if micro <= 0 || micro >= n {
		return []Batch{{Seqs: b.Seqs, Width: w}}, []int{0}
	}
	for lo := 0; lo < n; lo += micro {
		parts = append(parts, Batch{Seqs: b.Seqs[lo:min(lo+micro, n)], Width: w})
		first = append(first, lo)
	}
	return parts, first
}

// forwardLoss runs the forward pass of b on p, in micro-batches of micro
// sequences (Score on each when there are several: backprop runs them
// again), into lp and ent ([B·Width]), and the loss on them. It returns
// the loss's result, checked.
func forwardLoss(p passes, b Batch, temperature float64, micro int, lossFn LossFunc, lp, ent []float64) (loss.Result, error) {
	w := b.width()
	parts, first := microBatches(b, micro)
	run := p.Forward
	if len(parts) > 1 {
		run = p.Score
	}
	for i, mb := range parts {
		lo, hi := first[i]*w, (first[i]+len(mb.Seqs))*w
		if err := run(mb, temperature, lp[lo:hi], ent[lo:hi]); err != nil {
			return loss.Result{}, err
		}
	}
	g, err := lossFn(lp, ent)
	if err != nil {
		return loss.Result{}, fmt.Errorf("loss: %w", err)
	}
	if n := len(lp); len(g.DLogp) != n || (g.DEntropy != nil && len(g.DEntropy) != n) {
		return loss.Result{}, fmt.Errorf("%w: loss gradients have %d/%d elements, want %d", ErrBadInput, len(g.DLogp), len(g.DEntropy), n)
	}
	if math.IsNaN(g.Loss) || math.IsInf(g.Loss, 0) {
		return loss.Result{}, fmt.Errorf("loss %g: %w", g.Loss, ErrNonFinite)
	}
	return g, nil
}

// backprop zeros p's gradients and accumulates those of the loss result
// g over b: one Backward after forwardLoss's single Forward, or, with
// several micro-batches, a Forward and a Backward on each, whose outputs
// go to scratch (two micro-batches' worth of slots).
func backprop(p passes, b Batch, temperature float64, micro int, g loss.Result, scratch []float64) error {
	p.ZeroGrad()
	parts, first := microBatches(b, micro)
	if len(parts) == 1 {
		return p.Backward(g.DLogp, g.DEntropy)
	}
	m := len(parts[0].Seqs) * b.width()
	lp, ent := scratch[:m], scratch[m:2*m]
	w := b.width()
	for i, mb := range parts {
		lo, hi := first[i]*w, (first[i]+len(mb.Seqs))*w
		if err := p.Forward(mb, temperature, lp[:hi-lo], ent[:hi-lo]); err != nil {
			return err
		}
		var dH []float64
		if g.DEntropy != nil {
			dH = g.DEntropy[lo:hi]
		}
		if err := p.Backward(g.DLogp[lo:hi], dH); err != nil {
			return err
		}
	}
	return nil
}

// tokenStats counts b's sequences and completion tokens and averages the
// entropies ent ([N·Width]) over the tokens.
func tokenStats(b Batch, ent []float64) StepStats {
	w := b.width()
	st := StepStats{Sequences: len(b.Seqs)}
	var hsum float64
	for i, s := range b.Seqs {
		for t := range s.Completion {
			hsum += ent[i*w+t]
			st.Tokens++
		}
	}
	st.MeanEntropy = hsum / float64(max(st.Tokens, 1))
	return st
}

// SupervisedStep trains on gold completions (e.g. the solution plus EOS)
// with loss.Supervised: the token mean of −log p(completion token) at
// temperature 1.
func (l *Learner) SupervisedStep(seqs []Sequence) (StepStats, error) {
	lb := Batch{Seqs: seqs}.LossBatch()
	return l.Step(Batch{Seqs: seqs}, 1, func(lp, _ []float64) (loss.Result, error) { return loss.Supervised(lb, lp) })
}

func (l *Learner) checkBatch(b Batch, temperature float64) error {
	if !(temperature > 0) {
		return fmt.Errorf("%w: temperature %g must be > 0", ErrBadInput, temperature)
	}
	if len(b.Seqs) == 0 {
		return fmt.Errorf("%w: empty batch", ErrBadInput)
	}
	for i, s := range b.Seqs {
		if len(s.Completion) > b.width() {
			return fmt.Errorf("%w: sequence %d: %d completion tokens exceed width %d", ErrBadInput, i, len(s.Completion), b.width())
		}
	}
	return checkSequences(l.cfg, b.Seqs)
}

// SaveOptimizer writes the AdamW state to dir/optimizer.safetensors.
func (l *Learner) SaveOptimizer(dir string) error {
	st, err := l.eng.OptimizerState()
	if err != nil {
		return fmt.Errorf("save optimizer state: %w", err)
	}
	return l.hyper.WriteState(filepath.Join(dir, optim.StateFileName), st)
}

// LoadOptimizer restores the AdamW state saved by SaveOptimizer; a moment
// that is not finite, or a negative second moment, is refused (optim's
// ReadState names it).
func (l *Learner) LoadOptimizer(dir string) error {
	path := filepath.Join(dir, optim.StateFileName)
	var shapes []optim.Shape
	for _, s := range newLayout(l.cfg).specs {
		shapes = append(shapes, optim.Shape{Name: s.Name, Size: s.Size()})
	}
	st, err := optim.ReadState(path, shapes)
	if err != nil {
		return err
	}
	if err := l.eng.SetOptimizerState(st); err != nil {
		return fmt.Errorf("load optimizer state %s: %w", path, err)
	}
	return nil
}
