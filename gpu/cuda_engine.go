//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"runtime"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
	"github.com/mgrpo/mgrpo/gpu/internal/vec"
	"github.com/mgrpo/mgrpo/gpu/optim"
)

var (
	_ Engine      = (*cudaEngine)(nil)
	_ ModelEngine = (*cudaModel)(nil)
)

// cudaEngine is the CUDA device's Engine: the weights (cudaNet), their
// gradients and AdamW's moments as flat fp32 buffers on the device, and a
// training workspace sized by the largest batch seen. Per pass only the
// row plan goes in and the need rows' log-probs and entropies come out;
// per step the upstream gradients go in and a few scalars come out. Its
// device memory is freed by a cleanup when it is garbage collected: every
// method that touches the device keeps it alive to the end
// (runtime.KeepAlive).
type cudaEngine struct {
	dev     *cudaDevice
	net     *cudaNet
	cfg     Config
	lc      LearnerConfig
	hyper   *optim.AdamW // lc's hyper-parameters: the step constants (Coeffs)
	g, m, v cuda.Ptr     // [P] gradients, exp_avg, exp_avg_sq
	nodecay cuda.Ptr     // AdamW's no-decay ranges (int64 pairs)
	part    cuda.Ptr     // reduction scratch: 3·ReduceParts float64
	out     cuda.Ptr     // reduction results: 3 float64
	steps   int
	moments bool // m and v hold a state (false: zeros, reported as none)
	mem     *arena
	wsMem   *arena
	ws      *cudaActs
	plan    rowPlan
	last    bool    // ws holds a Forward to differentiate
	temp    float64 // its temperature
	pending error   // a device error of ZeroGrad, reported by the next method with an error result
}

// newCUDAEngine returns a learner engine on d over a copy of w, after
// checking that the weights, gradients, moments and their bf16 copy fit
// in the device's free memory.
func newCUDAEngine(d *cudaDevice, cfg Config, w []float32, lc LearnerConfig) (*cudaEngine, error) {
	if err := checkCUDAConfig(cfg); err != nil {
		return nil, err
	}
	hyper, err := optim.NewAdamW(lc.LR, lc.Beta1, lc.Beta2, lc.Eps, lc.WeightDecay)
	if err != nil {
		return nil, err
	}
	P, lay := cfg.NumParams(), newCUDALayout(cfg)
	need := netBytes(d, cfg) + 12*int64(P) + 8*int64(4*kernels.ReduceParts+len(lay.nodecay))
	if err := d.checkFree("the learner (weights, gradients and AdamW moments)", need); err != nil {
		return nil, err
	}
	net, err := newCUDANet(d, cfg)
	if err != nil {
		return nil, err
	}
	e := &cudaEngine{dev: d, net: net, cfg: cfg, lc: lc, hyper: hyper, mem: &arena{dev: d}, wsMem: &arena{dev: d}}
	runtime.AddCleanup(e, releaseAll, []*arena{net.mem, e.mem, e.wsMem})
	if err := e.init(w); err != nil {
		return nil, err
	}
	return e, nil
}

// init allocates the gradients, moments and reduction buffers, uploads
// the weights and zeros the rest.
func (e *cudaEngine) init(w []float32) error {
	P, rt := e.net.lay.size, e.dev.rt
	e.g, e.m, e.v = e.mem.f32(P), e.mem.f32(P), e.mem.f32(P)
	e.nodecay = e.mem.take(8 * int64(max(len(e.net.lay.nodecay), 1)))
	e.part, e.out = e.mem.f64(3*kernels.ReduceParts), e.mem.f64(3)
	if e.mem.err != nil {
		return e.mem.err
	}
	for _, p := range []cuda.Ptr{e.g, e.m, e.v} {
		if err := rt.Memset(p, 0, 4*int64(P)); err != nil {
			return fmt.Errorf("new learner: %w", err)
		}
	}
	if err := rt.Upload(e.nodecay, cuda.Bytes(e.net.lay.nodecay)); err != nil {
		return fmt.Errorf("new learner: %w", err)
	}
	return e.net.setWeights(w)
}

// workspace returns the training workspace with room for the planned
// pass.
func (e *cudaEngine) workspace() (*cudaActs, error) {
	s := planShape(&e.plan)
	ws, err := e.net.workspace(e.ws, e.wsMem, s, true, fmt.Sprintf("a learner batch of %d sequences (%d rows, %d scored)", s.B, s.N, s.K))
	e.ws = ws
	return ws, err
}

// reserve sizes the training workspace for a pass over b (Learner.Reserve).
func (e *cudaEngine) reserve(b Batch) error {
	e.last = false // the plan no longer describes the last Forward
	planRows(&e.plan, b.Seqs, 0, b.width(), true)
	_, err := e.workspace()
	return err
}

// run is the forward pass of Forward and Score.
func (e *cudaEngine) run(b Batch, temperature float64, lp, ent []float64) error {
	defer runtime.KeepAlive(e)
	e.last = false
	if err := e.takePending(); err != nil {
		return err
	}
	planRows(&e.plan, b.Seqs, 0, b.width(), true)
	ws, err := e.workspace()
	if err != nil {
		return err
	}
	n := len(b.Seqs) * b.width()
	return e.net.forward(ws, &e.plan, true, temperature, lp[:n], ent[:n])
}

// Forward implements Engine.
func (e *cudaEngine) Forward(b Batch, temperature float64, lp, ent []float64) error {
	if err := e.run(b, temperature, lp, ent); err != nil {
		return err
	}
	e.last, e.temp = true, temperature
	return nil
}

// Score implements Engine.
func (e *cudaEngine) Score(b Batch, temperature float64, lp, ent []float64) error {
	return e.run(b, temperature, lp, ent)
}

// Backward implements Engine.
func (e *cudaEngine) Backward(dLogp, dEntropy []float64) error {
	defer runtime.KeepAlive(e)
	if !e.last {
		return fmt.Errorf("backward: %w: no forward pass to differentiate", ErrBadInput)
	}
	if err := e.takePending(); err != nil {
		return err
	}
	if err := e.ws.upstream(e.dev.rt, e.plan.slots, dLogp, dEntropy); err != nil {
		return err
	}
	p := newCUDAPass(e.net, e.ws)
	if p.backward(e.g, e.temp); p.err != nil {
		return fmt.Errorf("backward: %w", p.err)
	}
	return nil
}

// ZeroGrad implements Engine.
func (e *cudaEngine) ZeroGrad() {
	defer runtime.KeepAlive(e)
	if err := e.dev.rt.Memset(e.g, 0, 4*int64(e.net.lay.size)); err != nil && e.pending == nil {
		e.pending = fmt.Errorf("zero gradients: %w", err)
	}
}

// takePending returns (and forgets) the error ZeroGrad met.
func (e *cudaEngine) takePending() error {
	err := e.pending
	e.pending = nil
	return err
}

// ClipGradNorm implements Engine: the sum of squares in float64 in a fixed
// order, and the scaling, on the device; the norm comes back.
func (e *cudaEngine) ClipGradNorm(maxNorm float64) (float64, error) {
	defer runtime.KeepAlive(e)
	if err := e.takePending(); err != nil {
		return 0, err
	}
	rt, P := e.dev.rt, int64(e.net.lay.size)
	if err := kernels.SumSquares(rt, e.out, e.part, e.g, P); err != nil {
		return 0, fmt.Errorf("gradient norm: %w", err)
	}
	if err := kernels.ClipScale(rt, e.g, P, e.out, maxNorm); err != nil {
		return 0, fmt.Errorf("clip: %w", err)
	}
	var sumsq [1]float64
	if err := cuda.DownloadSlice(rt, sumsq[:], e.out); err != nil {
		return 0, fmt.Errorf("gradient norm: %w", err)
	}
	return math.Sqrt(sumsq[0]), nil
}

// Update implements Engine: the preview on the device (update and weight
// norms, the first element that would turn non-finite), the refusals, then
// the step; AdamW's arithmetic is vec.AdamWElement's, bit for bit.
func (e *cudaEngine) Update(lr float64) error {
	defer runtime.KeepAlive(e)
	if err := e.takePending(); err != nil {
		return err
	}
	rt, P, nr := e.dev.rt, int64(e.net.lay.size), len(e.net.lay.nodecay)/2
	k := e.hyper.Coeffs(e.steps+1, lr)
	if err := kernels.AdamWPreview(rt, e.out, e.part, e.net.w, e.g, e.m, e.v, P, e.nodecay, nr, &k); err != nil {
		return fmt.Errorf("update preview: %w", err)
	}
	var u [3]float64
	if err := cuda.DownloadSlice(rt, u[:], e.out); err != nil {
		return fmt.Errorf("update preview: %w", err)
	}
	err := error(nil)
	if u[2] >= 0 {
		err = e.elementError(int(u[2]), k)
	} else if norm, wnorm, r := math.Sqrt(u[0]), math.Sqrt(u[1]), e.lc.MaxUpdateRatio; r > 0 && norm > r*wnorm {
		err = fmt.Errorf("update norm %.4g is %.3g× the weights' norm %.4g (limit %g×)", norm, norm/wnorm, wnorm, r)
	}
	if err != nil {
		return fmt.Errorf("lr %g: %w (not applied): %w", lr, ErrBadUpdate, err)
	}
	if err := kernels.AdamW(rt, e.net.w, e.g, e.m, e.v, P, e.nodecay, nr, &k); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	e.steps++
	e.moments, e.last = true, false
	return e.net.weightsChanged()
}

// elementError names element i's tensor and the value a step would make
// non-finite, from the element's weight, gradient and moments (the same
// arithmetic as the kernel: optim's message for the CPU's refusal).
func (e *cudaEngine) elementError(i int, k vec.AdamWCoeffs) error {
	var x [4]float32
	for j, p := range []cuda.Ptr{e.net.w, e.g, e.m, e.v} {
		if err := cuda.DownloadSlice(e.dev.rt, x[j:j+1], f32At(p, i)); err != nil {
			return err
		}
	}
	for _, s := range newLayout(e.cfg).specs {
		if i >= s.Offset && i < s.Offset+s.Size() {
			if s.NoDecay() {
				k.Decay = 1
			}
			w, m, v := vec.AdamWElement(x[0], x[1], x[2], x[3], &k)
			return optim.ElementError(s.Name, i-s.Offset, w, m, v)
		}
	}
	return fmt.Errorf("element %d is outside the weights", i)
}

// Steps implements Engine.
func (e *cudaEngine) Steps() int { return e.steps }

// ReadWeights implements Engine.
func (e *cudaEngine) ReadWeights(dst []float32, offset int) error {
	defer runtime.KeepAlive(e)
	return e.net.readWeights(dst, offset)
}

// ReadGrads implements Engine.
func (e *cudaEngine) ReadGrads(dst []float32, offset int) error {
	defer runtime.KeepAlive(e)
	if offset < 0 || offset+len(dst) > e.net.lay.size {
		return fmt.Errorf("%w: gradients %d..%d of %d", ErrBadInput, offset, offset+len(dst), e.net.lay.size)
	}
	return cuda.DownloadSlice(e.dev.rt, dst, f32At(e.g, offset))
}

// SetWeights implements Engine.
func (e *cudaEngine) SetWeights(w []float32) error {
	defer runtime.KeepAlive(e)
	e.last = false
	return e.net.setWeights(w)
}

// Snapshot implements Engine: a model over a device-to-device copy of the
// weights.
func (e *cudaEngine) Snapshot() (ModelEngine, error) {
	defer runtime.KeepAlive(e)
	return newCUDAModelFrom(e.net)
}

// OptimizerState implements Engine: the moments copied to the host (one
// buffer, a slice per tensor); none before the first step.
func (e *cudaEngine) OptimizerState() (optim.State, error) {
	defer runtime.KeepAlive(e)
	st := optim.State{Step: e.steps}
	if !e.moments {
		return st, nil
	}
	P := e.net.lay.size
	host := make([]float32, 2*P)
	if err := cuda.DownloadSlice(e.dev.rt, host[:P], e.m); err != nil {
		return st, fmt.Errorf("optimizer state: %w", err)
	}
	if err := cuda.DownloadSlice(e.dev.rt, host[P:], e.v); err != nil {
		return st, fmt.Errorf("optimizer state: %w", err)
	}
	for _, s := range newLayout(e.cfg).specs {
		lo, hi := s.Offset, s.Offset+s.Size()
		st.Moments = append(st.Moments, optim.Moments{Name: s.Name, ExpAvg: host[lo:hi:hi], ExpAvgSq: host[P+lo : P+hi : P+hi]})
	}
	return st, nil
}

// SetOptimizerState implements Engine: optim.AdamW.SetState's checks
// (names and sizes in layout order, finite moments, exp_avg_sq ≥ 0)
// before anything is uploaded.
func (e *cudaEngine) SetOptimizerState(st optim.State) error {
	defer runtime.KeepAlive(e)
	specs := newLayout(e.cfg).specs
	params := make([]optim.Param, len(specs))
	for i, s := range specs {
		params[i] = optim.Param{Name: s.Name, W: make([]float32, 0)}
		if i < len(st.Moments) && st.Moments[i].Name == s.Name && len(st.Moments[i].ExpAvg) == s.Size() {
			params[i].W = st.Moments[i].ExpAvg // sizes checked against the layout: SetState checks the rest
		} else if st.Moments != nil {
			return fmt.Errorf("%w: moments %d do not match parameter %q (%d values)", optim.ErrState, i, s.Name, s.Size())
		}
	}
	if err := (&optim.AdamW{}).SetState(st, params); err != nil {
		return err
	}
	if err := e.uploadMoments(st.Moments, specs); err != nil {
		return fmt.Errorf("set optimizer state: %w", err)
	}
	e.steps, e.moments = st.Step, st.Moments != nil
	return nil
}

// uploadMoments writes each tensor's moments at its offset (zeros for
// none).
func (e *cudaEngine) uploadMoments(ms []optim.Moments, specs []tensorSpec) error {
	rt := e.dev.rt
	if ms == nil {
		for _, p := range []cuda.Ptr{e.m, e.v} {
			if err := rt.Memset(p, 0, 4*int64(e.net.lay.size)); err != nil {
				return err
			}
		}
		return nil
	}
	for i, s := range specs {
		if err := rt.Upload(f32At(e.m, s.Offset), cuda.Bytes(ms[i].ExpAvg)); err != nil {
			return err
		}
		if err := rt.Upload(f32At(e.v, s.Offset), cuda.Bytes(ms[i].ExpAvgSq)); err != nil {
			return err
		}
	}
	return nil
}
