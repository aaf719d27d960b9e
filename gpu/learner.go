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
// entropy term). Any objective plugs in as a closure, e.g.
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
	// Device runs the learner's weight products (nil: the CPU). The
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

// Learner trains a copy of a model's weights: forward over a packed batch,
// a caller-given loss, backward, global-norm clipping and AdamW. It keeps
// one workspace per batch shape, so steady-state steps do not allocate
// activations. A Learner is not safe for concurrent use.
type Learner struct {
	cfg       Config
	lc        LearnerConfig
	net       *net[float32]
	one       *net[float32] // net's weights, single-threaded: each shard's (shard.go)
	shards    int           // shards of a batch, at most
	grad      params[float32]
	shardGrad []params[float32] // gradients of shards 1.. (shard 0 writes grad)
	params    []optim.Param
	opt       *optim.AdamW
	ws        map[[2]int]*batch[float32]
	version   int64
}

// learnerShards is the most shards a learner splits its batches into:
// shardsPerWorker per worker on the CPU, when the shards' extra gradient
// buffers stay small; one (each product split over the cores, or run by
// the device) otherwise.
func learnerShards(c Config, workers int, device bool) int {
	if device || 4*c.params() > maxShardGradBytes {
		return 1
	}
	return shardCount(math.MaxInt, workers)
}

// NewLearner returns a learner starting from m's weights (copied) at
// version m.Version().
func NewLearner(m *Model, lc LearnerConfig) (*Learner, error) {
	if lc.Schedule.Kind == "" {
		lc.Schedule = optim.Schedule{Kind: optim.Constant, Base: lc.LR}
	}
	opt, err := optim.NewAdamW(lc.LR, lc.Beta1, lc.Beta2, lc.Eps, lc.WeightDecay)
	if err != nil {
		return nil, fmt.Errorf("new learner: %w", err)
	}
	if lc.MaxGradNorm < 0 || math.IsNaN(lc.MaxGradNorm) {
		return nil, fmt.Errorf("new learner: max grad norm %g must be ≥ 0", lc.MaxGradNorm)
	}
	if !(lc.MaxUpdateRatio >= 0) {
		return nil, fmt.Errorf("new learner: max update ratio %g must be ≥ 0", lc.MaxUpdateRatio)
	}
	// Weights, AdamW moments and a gradient per shard: 3 + shards float32
	// per parameter.
	if _, cpu := lc.Device.(CPU); cpu {
		lc.Device = nil // the CPU's products are the default; its batches run in shards
	}
	shards := learnerShards(m.cfg, m.net.workers, lc.Device != nil)
	if err := CheckMemory("the learner (weights, gradients and AdamW state)", toBytes((12+4*float64(shards))*m.cfg.params())); err != nil {
		return nil, fmt.Errorf("new learner: %w", err)
	}
	w, g := m.Weights(), make([]float32, m.NumParams())
	l := &Learner{cfg: m.cfg, lc: lc, net: newNet(m.cfg, w, m.net.workers), shards: shards, grad: bindParams(m.cfg, g), opt: opt,
		ws: map[[2]int]*batch[float32]{}}
	if lc.Device == nil {
		l.net.pack(true)
	}
	l.one = l.net.serial()
	for i := 1; i < shards; i++ {
		l.shardGrad = append(l.shardGrad, bindParams(m.cfg, make([]float32, m.NumParams())))
	}
	for _, s := range newLayout(m.cfg).specs {
		l.params = append(l.params, optim.Param{Name: s.Name, W: w[s.Offset : s.Offset+s.Size()],
			G: g[s.Offset : s.Offset+s.Size()], NoDecay: s.Norm})
	}
	if lc.Device != nil {
		l.net.mm = lc.Device.linear32(l.net.workers)
	}
	opt.Workers = l.net.workers
	l.version = m.version
	return l, nil
}

// Config returns the model dimensions the learner trains.
func (l *Learner) Config() Config { return l.cfg }

// Version is the policy version of the current weights: the starting
// model's version plus the optimiser steps taken.
func (l *Learner) Version() int64 { return l.version }

// Snapshot returns the current weights as an immutable Model (a copy)
// carrying the current version, for generators and checkpoints.
func (l *Learner) Snapshot() *Model {
	return newModelLike(l.cfg, append([]float32(nil), l.net.w.flat...), l.version, l.net)
}

// SetWeights replaces the learner's weights and version by a copy of m's
// (same config required); the optimiser state is kept.
func (l *Learner) SetWeights(m *Model) error {
	if m.cfg != l.cfg {
		return fmt.Errorf("set weights: %w: model config %+v, learner %+v", ErrBadInput, m.cfg, l.cfg)
	}
	copy(l.net.w.flat, m.net.w.flat)
	l.net.repack()
	l.version = m.version
	return nil
}

// workspace returns the workspace of shape (b, t), keeping at most two
// shapes alive; a new one must fit in the memory available.
func (l *Learner) workspace(b, t int) (*batch[float32], error) {
	key := [2]int{b, t}
	if bt, ok := l.ws[key]; ok {
		return bt, nil
	}
	if len(l.ws) >= 2 {
		clear(l.ws)
	}
	shards := min(shardCount(b, l.net.workers), l.shards)
	need := toBytes(batchBytes(l.cfg, b, t, shards, l.net.workers, true))
	if err := CheckMemory(fmt.Sprintf("a learner batch of %d sequences × %d tokens", b, t), need); err != nil {
		return nil, err
	}
	bt := newBatch[float32](l.cfg, b, t, shards, l.net.workers, true)
	l.ws[key] = bt
	return bt, nil
}

// passNet is the net a pass over bt runs on: the single-threaded view for
// several shards, the whole net (each product and kernel split over the
// workers, or on the device) for one.
func passNet[F Float](full, one *net[F], bt *batch[F]) *net[F] {
	if len(bt.parts) > 1 {
		return one
	}
	return full
}

// Score is Model.Score on the learner's current weights.
func (l *Learner) Score(seqs []Sequence, temperature float64) ([]TokenScores, error) {
	if !(temperature > 0) {
		return nil, fmt.Errorf("%w: temperature %g must be > 0", ErrBadInput, temperature)
	}
	if err := checkSequences(l.cfg, seqs); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	out := make([]TokenScores, len(seqs))
	if len(seqs) > 0 {
		bt, err := l.workspace(len(seqs), paddedLen(l.cfg, seqs))
		if err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
		scoreInto(out, passNet(l.net, l.one, bt), bt, seqs, temperature)
		if err := l.net.mm.Err(); err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
	}
	return out, nil
}

// Step runs one update: per-token log-probs and entropies of the batch's
// completions at the given temperature, the loss and its gradients from
// lossFn, backward, global-norm clipping and one AdamW step at the
// scheduled learning rate. On an error (bad batch, loss error, non-finite
// loss or gradient) the weights are unchanged.
func (l *Learner) Step(b Batch, temperature float64, lossFn LossFunc) (StepStats, error) {
	if err := l.checkBatch(b, temperature); err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	bt, err := l.workspace(len(b.Seqs), paddedLen(l.cfg, b.Seqs))
	if err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	start := time.Now()
	n := passNet(l.net, l.one, bt)
	bt.load(b.Seqs)
	bt.each(func(_ int, a *acts[float32]) { n.forward(a, temperature) })
	if err := l.net.mm.Err(); err != nil {
		return StepStats{}, fmt.Errorf("learner step: forward: %w", err)
	}
	lp, ent, st := l.tokenOutputs(bt, b)
	g, err := lossFn(lp, ent)
	if err != nil {
		return StepStats{}, fmt.Errorf("learner step: loss: %w", err)
	}
	if err := l.setUpstream(bt, b, g); err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	forwardEnd := time.Now()
	bt.each(func(i int, a *acts[float32]) {
		g := l.grad
		if i > 0 {
			g = l.shardGrad[i-1]
		}
		clear(g.flat)
		n.backward(a, g, temperature)
	})
	if err := l.net.mm.Err(); err != nil {
		return StepStats{}, fmt.Errorf("learner step: backward: %w", err)
	}
	l.sumShardGrads(len(bt.parts) - 1)
	backwardEnd := time.Now()
	st.GradNorm = optim.ClipGlobalNorm(l.params, l.lc.MaxGradNorm, l.net.workers)
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return StepStats{}, fmt.Errorf("learner step: gradient norm %g: %w", st.GradNorm, ErrNonFinite)
	}
	// The schedule counts this optimiser's steps (restored by LoadOptimizer),
	// not the policy version, which may include a warm start's steps.
	st.Loss, st.LR, st.LossStats = g.Loss, l.lc.Schedule.LR(l.opt.StepCount()), g.Stats
	if err := l.update(st.LR); err != nil {
		return StepStats{}, fmt.Errorf("learner step: %w", err)
	}
	l.version++
	st.Version = l.version
	st.Forward, st.Backward, st.Optimizer = forwardEnd.Sub(start), backwardEnd.Sub(forwardEnd), time.Since(backwardEnd)
	return st, nil
}

// update takes one AdamW step at lr after checking, on a preview, what it
// would do: a weight or moment that would not be finite, or an update norm
// above MaxUpdateRatio times the weights' norm, leaves weights and
// optimiser state as they are and returns an error wrapping ErrBadUpdate.
func (l *Learner) update(lr float64) error {
	u, err := l.opt.Preview(l.params, lr)
	if r := l.lc.MaxUpdateRatio; err == nil && r > 0 && u.Norm > r*u.WeightNorm {
		err = fmt.Errorf("update norm %.4g is %.3g× the weights' norm %.4g (limit %g×)", u.Norm, u.Norm/u.WeightNorm, u.WeightNorm, r)
	}
	if err != nil {
		return fmt.Errorf("lr %g: %w (not applied): %w", lr, ErrBadUpdate, err)
	}
	l.opt.Step(l.params, lr)
	l.net.repack()
	return nil
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

// sumShardGrads adds the gradients of shards 1..k into grad, in shard
// order, split over the workers by parameter ranges.
func (l *Learner) sumShardGrads(k int) {
	if k == 0 {
		return
	}
	splitRows(len(l.grad.flat), l.net.workers, func(lo, hi int) {
		for _, sg := range l.shardGrad[:k] {
			blas32Impl.Saxpy(hi-lo, 1, sg.flat[lo:hi], 1, l.grad.flat[lo:hi], 1)
		}
	})
}

// tokenOutputs gathers the [N·Width] log-probs and entropies of the
// completion tokens after a forward pass, with counts for the stats.
func (l *Learner) tokenOutputs(bt *batch[float32], b Batch) (lp, ent []float64, st StepStats) {
	w, v := b.width(), l.cfg.Vocab
	lp, ent = make([]float64, len(b.Seqs)*w), make([]float64, len(b.Seqs)*w)
	var hsum float64
	for i, s := range b.Seqs {
		for t, id := range s.Completion {
			a, r := bt.row(i, s, t)
			lp[i*w+t], ent[i*w+t] = float64(a.logp[r*v+id]), float64(a.ent[r])
			hsum += ent[i*w+t]
			st.Tokens++
		}
	}
	st.Sequences = len(b.Seqs)
	st.MeanEntropy = hsum / float64(max(st.Tokens, 1))
	return lp, ent, st
}

// setUpstream checks the loss output and scatters its per-token gradients
// onto the workspace rows.
func (l *Learner) setUpstream(bt *batch[float32], b Batch, g loss.Result) error {
	w, n := b.width(), len(b.Seqs)*b.width()
	if len(g.DLogp) != n || (g.DEntropy != nil && len(g.DEntropy) != n) {
		return fmt.Errorf("%w: loss gradients have %d/%d elements, want %d", ErrBadInput, len(g.DLogp), len(g.DEntropy), n)
	}
	if math.IsNaN(g.Loss) || math.IsInf(g.Loss, 0) {
		return fmt.Errorf("loss %g: %w", g.Loss, ErrNonFinite)
	}
	for _, a := range bt.parts {
		clear(a.dlp)
		clear(a.dH)
	}
	for i, s := range b.Seqs {
		for t := range s.Completion {
			a, r := bt.row(i, s, t)
			a.dlp[r] = g.DLogp[i*w+t]
			if g.DEntropy != nil {
				a.dH[r] = g.DEntropy[i*w+t]
			}
		}
	}
	return nil
}

// SaveOptimizer writes the AdamW state to dir/optimizer.safetensors.
func (l *Learner) SaveOptimizer(dir string) error {
	return l.opt.SaveState(filepath.Join(dir, optim.StateFileName))
}

// LoadOptimizer restores the AdamW state saved by SaveOptimizer; a moment
// that is not finite, or a negative second moment, is refused (optim's
// LoadState names it).
func (l *Learner) LoadOptimizer(dir string) error {
	return l.opt.LoadState(filepath.Join(dir, optim.StateFileName), l.params)
}
