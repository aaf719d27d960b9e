package gpu

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/mgrpo/mgrpo/gpu/optim"
)

// The CPU engine: the hand-written kernels of model.go over host buffers,
// a batch in shards of sequences (shard.go) with a workspace per batch
// shape, the weights packed for the products (packed.go), and
// optim.AdamW. Its sharding, packing and workspaces are its own business:
// nothing outside this file and cpu_model.go sees them.

var (
	_ Engine      = (*cpuEngine)(nil)
	_ ModelEngine = (*cpuModel)(nil)
)

// cpuTrainer runs a net's training passes on the CPU, in either precision
// (the gradient checks and the micro-batching test run it in float64):
// a batch in shards, a workspace per shape, a gradient buffer per shard.
type cpuTrainer[F Float] struct {
	cfg       Config
	net       *net[F]
	one       *net[F] // net's weights, single-threaded: each shard's (shard.go)
	shards    int     // shards of a batch, at most
	grad      params[F]
	shardGrad []params[F] // gradients of shards 1.. (shard 0 adds to grad)
	ws        map[[2]int]*batch[F]
	last      *batch[F] // the workspace of the last Forward (nil: none to differentiate)
	temp      float64   // its temperature
}

// newCPUTrainer returns a trainer over w (which it takes) on workers
// goroutines, splitting batches into at most shards shards, its weight
// products on mm (nil: the CPU, through packed weights when packable).
func newCPUTrainer[F Float](cfg Config, w []F, workers, shards int, mm linear[F]) *cpuTrainer[F] {
	n := newNet(cfg, w, workers)
	if mm == nil {
		n.pack(true)
	}
	t := &cpuTrainer[F]{cfg: cfg, net: n, one: n.serial(), shards: shards, grad: bindParams(cfg, make([]F, len(w))),
		ws: map[[2]int]*batch[F]{}}
	if mm != nil {
		n.mm = mm
	}
	for i := 1; i < shards; i++ {
		t.shardGrad = append(t.shardGrad, bindParams(cfg, make([]F, len(w))))
	}
	return t
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

// workspace returns a workspace for b sequences of at most tt rows: the
// one of shape (b, tt), or else the one of b sequences with the fewest
// rows above tt (micro-batches of one size and different lengths share
// it; a pass gives the same results in either), or else a new one, which
// must fit in the memory available. It keeps at most two shapes alive.
func (t *cpuTrainer[F]) workspace(b, tt int) (*batch[F], error) {
	key := [2]int{b, tt}
	if bt, ok := t.ws[key]; ok {
		return bt, nil
	}
	var best *batch[F]
	for _, bt := range t.ws {
		if bt.B == b && bt.T > tt && (best == nil || bt.T < best.T) {
			best = bt
		}
	}
	if best != nil {
		return best, nil
	}
	if len(t.ws) >= 2 {
		clear(t.ws)
	}
	shards := min(shardCount(b, t.net.workers), t.shards)
	need := toBytes(batchBytes(t.cfg, b, tt, shards, t.net.workers, true))
	if err := CheckMemory(fmt.Sprintf("a learner batch of %d sequences × %d tokens", b, tt), need); err != nil {
		return nil, err
	}
	bt := newBatch[F](t.cfg, b, tt, shards, t.net.workers, true)
	t.ws[key] = bt
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

// run is the forward pass of Forward and Score, in the workspace of b's
// shape, which it returns.
func (t *cpuTrainer[F]) run(b Batch, temperature float64, lp, ent []float64) (*batch[F], error) {
	t.last = nil
	bt, err := t.workspace(len(b.Seqs), paddedLen(t.cfg, b.Seqs))
	if err != nil {
		return nil, err
	}
	bt.forward(passNet(t.net, t.one, bt), b, temperature, lp, ent)
	if err := t.net.mm.Err(); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	return bt, nil
}

// Forward implements Engine.
func (t *cpuTrainer[F]) Forward(b Batch, temperature float64, lp, ent []float64) error {
	bt, err := t.run(b, temperature, lp, ent)
	t.last, t.temp = bt, temperature
	return err
}

// Score implements Engine.
func (t *cpuTrainer[F]) Score(b Batch, temperature float64, lp, ent []float64) error {
	_, err := t.run(b, temperature, lp, ent)
	return err
}

// Backward implements Engine: each shard's gradients go to its own buffer,
// shard 0's straight into the sum, and the others are added in shard
// order.
func (t *cpuTrainer[F]) Backward(dLogp, dEntropy []float64) error {
	bt := t.last
	if bt == nil {
		return fmt.Errorf("backward: %w: no forward pass to differentiate", ErrBadInput)
	}
	for _, a := range bt.parts {
		a.upstream(dLogp, dEntropy)
	}
	n := passNet(t.net, t.one, bt)
	bt.each(func(i int, a *acts[F]) {
		g := t.grad
		if i > 0 {
			g = t.shardGrad[i-1]
			clear(g.flat)
		}
		n.backward(a, g, t.temp)
	})
	if err := t.net.mm.Err(); err != nil {
		return fmt.Errorf("backward: %w", err)
	}
	t.sumShardGrads(len(bt.parts) - 1)
	return nil
}

// ZeroGrad implements Engine.
func (t *cpuTrainer[F]) ZeroGrad() { clear(t.grad.flat) }

// sumShardGrads adds the gradients of shards 1..k into grad, in shard
// order, split over the workers by parameter ranges.
func (t *cpuTrainer[F]) sumShardGrads(k int) {
	if k == 0 {
		return
	}
	splitRows(len(t.grad.flat), t.net.workers, func(lo, hi int) {
		for _, sg := range t.shardGrad[:k] {
			axpy(sg.flat[lo:hi], t.grad.flat[lo:hi])
		}
	})
}

// axpy adds x to y.
func axpy[F Float](x, y []F) {
	if is32[F]() {
		blas32Impl.Saxpy(len(x), 1, as32(x), 1, as32(y), 1)
		return
	}
	blas64Impl.Daxpy(len(x), 1, as64(x), 1, as64(y), 1)
}

// cpuEngine is the CPU's Engine: a float32 trainer and AdamW over its
// weights, repacked after every change.
type cpuEngine struct {
	*cpuTrainer[float32]
	lc     LearnerConfig
	params []optim.Param // the weights and gradients by tensor, for the optimiser
	opt    *optim.AdamW
}

// newCPUEngine returns the CPU engine over a copy of w with lc's optimiser
// settings, its weight products on mm (nil: the CPU's, in shards).
func newCPUEngine(cfg Config, w []float32, lc LearnerConfig, mm linear[float32]) (*cpuEngine, error) {
	opt, err := optim.NewAdamW(lc.LR, lc.Beta1, lc.Beta2, lc.Eps, lc.WeightDecay)
	if err != nil {
		return nil, err
	}
	workers := runtime.GOMAXPROCS(0)
	shards := learnerShards(cfg, workers, mm != nil)
	// Weights, AdamW moments and a gradient per shard: 3 + shards float32
	// per parameter.
	if err := CheckMemory("the learner (weights, gradients and AdamW state)", toBytes((12+4*float64(shards))*cfg.params())); err != nil {
		return nil, err
	}
	t := newCPUTrainer(cfg, slices.Clone(w), workers, shards, mm)
	e := &cpuEngine{cpuTrainer: t, lc: lc, opt: opt}
	for _, s := range newLayout(cfg).specs {
		e.params = append(e.params, optim.Param{Name: s.Name, W: t.net.w.flat[s.Offset : s.Offset+s.Size()],
			G: t.grad.flat[s.Offset : s.Offset+s.Size()], NoDecay: s.NoDecay()})
	}
	opt.Workers = workers
	return e, nil
}

// ClipGradNorm implements Engine.
func (e *cpuEngine) ClipGradNorm(maxNorm float64) (float64, error) {
	return optim.ClipGlobalNorm(e.params, maxNorm, e.net.workers), nil
}

// Update implements Engine: the preview's refusals, then the step and a
// repack.
func (e *cpuEngine) Update(lr float64) error {
	u, err := e.opt.Preview(e.params, lr)
	if r := e.lc.MaxUpdateRatio; err == nil && r > 0 && u.Norm > r*u.WeightNorm {
		err = fmt.Errorf("update norm %.4g is %.3g× the weights' norm %.4g (limit %g×)", u.Norm, u.Norm/u.WeightNorm, u.WeightNorm, r)
	}
	if err != nil {
		return fmt.Errorf("lr %g: %w (not applied): %w", lr, ErrBadUpdate, err)
	}
	e.opt.Step(e.params, lr)
	e.net.repack()
	e.last = nil
	return nil
}

// Steps implements Engine.
func (e *cpuEngine) Steps() int { return e.opt.StepCount() }

// ReadWeights implements Engine.
func (e *cpuEngine) ReadWeights(dst []float32, offset int) error {
	return readRange(dst, e.net.w.flat, offset)
}

// ReadGrads implements Engine.
func (e *cpuEngine) ReadGrads(dst []float32, offset int) error {
	return readRange(dst, e.grad.flat, offset)
}

// readRange copies src[offset:offset+len(dst)] into dst.
func readRange(dst, src []float32, offset int) error {
	if offset < 0 || offset+len(dst) > len(src) {
		return fmt.Errorf("%w: weights %d..%d of %d", ErrBadInput, offset, offset+len(dst), len(src))
	}
	copy(dst, src[offset:])
	return nil
}

// SetWeights implements Engine.
func (e *cpuEngine) SetWeights(w []float32) error {
	if len(w) != len(e.net.w.flat) {
		return fmt.Errorf("%w: %d weights, the model has %d", ErrBadInput, len(w), len(e.net.w.flat))
	}
	copy(e.net.w.flat, w)
	e.net.repack()
	e.last = nil
	return nil
}

// OptimizerState implements Engine: the moments alias the optimiser's.
func (e *cpuEngine) OptimizerState() (optim.State, error) { return e.opt.State(), nil }

// SetOptimizerState implements Engine.
func (e *cpuEngine) SetOptimizerState(st optim.State) error { return e.opt.SetState(st, e.params) }

// Snapshot implements Engine: a CPU model over a copy of the weights and
// of their packing.
func (e *cpuEngine) Snapshot() (ModelEngine, error) {
	return newCPUModel(e.cfg, slices.Clone(e.net.w.flat), e.net), nil
}
