//go:build cuda || cudaemu

package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/loss"
)

// The CUDA engine (cuda_engine.go) on the runtime of the build: the CPU
// emulator with -tags cudaemu (here, in make test), GPU 0 with -tags cuda.

// testCUDADevice is a cuda device over the build's runtime whose products
// run in math, attention on the kernels AttentionAuto picks (the
// emulator says compute capability 9.0: the tensor cores for TF32 and bf16).
func testCUDADevice(t *testing.T, math cuda.Math) *cudaDevice {
	return newCUDADevice(cudatest.Open(t), math, false)
}

// testCUDADeviceAttn is testCUDADevice with attention on the kernels of a
// DeviceOptions.Attention choice.
func testCUDADeviceAttn(t *testing.T, math cuda.Math, attention string) *cudaDevice {
	d := testCUDADevice(t, math)
	var err error
	if d.attn, err = attentionMath(attention, math, d.rt.Device()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCUDAEngineContract runs the engine contract (engine_test.go) on
// the CUDA engine in each precision, TF32 and bf16 with attention on the
// tensor cores (head widths 32; 16 stays on the CUDA cores) and on the
// CUDA cores, with the tolerances its arithmetic earns against the
// float64 oracle (outputs relative to max(1, |x|), gradients to each
// tensor's largest), measured on the emulator (on an H200 in brackets):
//
//	fp32 (CUDA cores, tests only)  1e-4   worst 4.1e-5 (the GQA shape's k_proj) (3.4e-5)
//	TF32 (DTypeFloat32)            5e-3   worst 1.1e-4 outputs, 1.7e-3 gradients (1.1e-4, 1.4e-3);
//	                                      tensor-core attention 1.1e-4, 2.9e-3 (1.4e-4, 2.3e-3)
//	bf16 (DTypeBF16)               3e-2   worst 1.1e-3 outputs, 1.1e-2 gradients (1.3e-3, 1.2e-2)
//	  tensor-core attention        5e-2   worst 1.3e-3, 1.9e-2 (1.1e-3, 3.0e-2: 3e-2 was too close)
//
// (the tensor-core attention rounds its inputs, probabilities and ds to
// the products' precision: base's q_proj gradient takes it).
//
// TF32 and bf16 run it on Hugging Face-initialised weights (the
// contract's reduced mode): through the oracle's std-0.2 weights the
// inputs' rounding (2⁻¹¹ and 2⁻⁸) grows to 3e-2 and 3e-1.
func TestCUDAEngineContract(t *testing.T) {
	for _, tc := range []struct {
		math      cuda.Math
		attention string
		tol       float64
	}{
		{cuda.MathFP32, AttentionCUDACore, 1e-4},
		{cuda.MathTF32, AttentionTensor, 5e-3}, {cuda.MathTF32, AttentionCUDACore, 5e-3},
		{cuda.MathBF16, AttentionTensor, 5e-2}, {cuda.MathBF16, AttentionCUDACore, 3e-2},
	} {
		t.Run(tc.math.String()+" attention "+tc.attention, func(t *testing.T) {
			runEngineContract(t, engineContract{dev: testCUDADeviceAttn(t, tc.math, tc.attention), tol: tc.tol,
				reduced: tc.math != cuda.MathFP32})
		})
	}
}

// TestCUDAAttentionChoice: which attention kernels each choice gets.
func TestCUDAAttentionChoice(t *testing.T) {
	hopper, volta := cuda.Device{ComputeMajor: 9}, cuda.Device{ComputeMajor: 7}
	for _, tc := range []struct {
		choice string
		math   cuda.Math
		dev    cuda.Device
		want   cuda.Math
		fails  bool
	}{
		{"", cuda.MathBF16, hopper, cuda.MathBF16, false},
		{AttentionAuto, cuda.MathTF32, hopper, cuda.MathTF32, false},
		{AttentionAuto, cuda.MathFP32, hopper, cuda.MathFP32, false},
		{AttentionAuto, cuda.MathBF16, volta, cuda.MathFP32, false},
		{AttentionTensor, cuda.MathBF16, hopper, cuda.MathBF16, false},
		{AttentionTensor, cuda.MathBF16, volta, 0, true},
		{AttentionTensor, cuda.MathFP32, hopper, 0, true},
		{AttentionCUDACore, cuda.MathBF16, hopper, cuda.MathFP32, false},
	} {
		got, err := attentionMath(tc.choice, tc.math, tc.dev)
		if (err != nil) != tc.fails || !tc.fails && got != tc.want {
			t.Errorf("%q, %v products, compute %d: %v, %v; want %v (error: %v)", tc.choice, tc.math, tc.dev.ComputeMajor, got, err, tc.want, tc.fails)
		}
	}
}

// oracleErrors runs Forward and Backward of b on a fresh engine of dev
// and on the float64 CPU trainer from the same weights, and returns the
// worst output and gradient errors (relative as in the contract).
func oracleErrors(t *testing.T, dev Device, cfg Config, w64 []float64, w32 []float32, b Batch) (outs, grads float64) {
	t.Helper()
	eng, err := dev.newEngine(cfg, w32, DefaultLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	return oracleErrorsOn(t, eng, cfg, w64, b)
}

func oracleErrorsOn(t *testing.T, eng Engine, cfg Config, w64 []float64, b Batch) (outs, grads float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(len(b.Seqs))))
	dlp, dH := randomUpstream(rng, b)
	oracle := newCPUTrainer(cfg, w64, 1, 1, nil)
	n := len(b.Seqs) * b.width()
	lp, ent, lp64, ent64 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range lp {
		lp[i], ent[i] = math.NaN(), math.NaN() // every slot is written
	}
	eng.ZeroGrad()
	oracle.ZeroGrad()
	if err := eng.Forward(b, 0.7, lp, ent); err != nil {
		t.Fatal(err)
	}
	if err := eng.Backward(dlp, dH); err != nil {
		t.Fatal(err)
	}
	oracle.Forward(b, 0.7, lp64, ent64)
	oracle.Backward(dlp, dH)
	for i := range lp {
		outs = max(outs, math.Abs(lp[i]-lp64[i])/max(1, math.Abs(lp64[i])), math.Abs(ent[i]-ent64[i])/max(1, ent64[i]))
		if math.IsNaN(lp[i]) || math.IsNaN(ent[i]) {
			outs = math.Inf(1)
		}
	}
	g := make([]float32, cfg.NumParams())
	if err := eng.ReadGrads(g, 0); err != nil {
		t.Fatal(err)
	}
	grads, _ = gradError(cfg, g, oracle.grad.flat)
	return outs, grads
}

// TestCUDAEngineEdgeBatches: row plans the contract's batch does not have,
// against the float64 oracle (fp32 products): every row a need row (one-
// token prompts, where the last block runs on every row), no rows at all,
// a sequence filling the context, a workspace grown by a larger batch
// after a smaller one, and the lm_head in several blocks (a large
// vocabulary's).
func TestCUDAEngineEdgeBatches(t *testing.T) {
	cfg, _ := Preset("tiny")
	w64, w32 := oracleWeights(cfg, 21)
	rng := rand.New(rand.NewPCG(21, 1))
	ids := func(n int) []int { return randomIDs(rng, n, cfg.Vocab) }
	dev := testCUDADevice(t, cuda.MathFP32)
	for _, tc := range []struct {
		name string
		seqs []Sequence
	}{
		{"one sequence, one-token prompt", []Sequence{{Prompt: []int{1}, Completion: ids(6)}}},
		{"one-token prompts", []Sequence{{Prompt: []int{1}, Completion: ids(3)}, {Prompt: []int{1}, Completion: ids(1)}, {Prompt: []int{1}, Completion: ids(4)}}},
		{"no completions", []Sequence{{Prompt: []int{1, 5}}, {Prompt: []int{1}}}},
		{"the context", []Sequence{{Prompt: append([]int{1}, ids(9)...), Completion: ids(cfg.Context - 10)}, {Prompt: []int{1, 4}, Completion: ids(2)}}},
	} {
		outs, grads := oracleErrors(t, dev, cfg, w64, w32, Batch{Seqs: tc.seqs})
		if outs > 1e-4 || grads > 1e-4 {
			t.Errorf("%s: outputs off by %.3g, gradients by %.3g (want ≤ 1e-4)", tc.name, outs, grads)
		}
	}
	eng, err := dev.newEngine(cfg, w32, DefaultLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	small := Batch{Seqs: contractSeqs(rng, cfg.Vocab)[:3]}
	large := Batch{Seqs: contractSeqs(rng, cfg.Vocab)}
	for i, b := range []Batch{small, large, small} {
		if outs, grads := oracleErrorsOn(t, eng, cfg, w64, b); outs > 1e-4 || grads > 1e-4 {
			t.Errorf("pass %d in a reused workspace: outputs off by %.3g, gradients by %.3g (want ≤ 1e-4)", i, outs, grads)
		}
	}
	blocks, _ := dev.newEngine(cfg, w32, DefaultLearnerConfig())
	blocks.(*cudaEngine).net.headBudget = 3 * cfg.Vocab // the lm_head in blocks of 3 need rows, recomputed in backward
	if outs, grads := oracleErrorsOn(t, blocks, cfg, w64, large); outs > 1e-4 || grads > 1e-4 {
		t.Errorf("lm_head in blocks: outputs off by %.3g, gradients by %.3g (want ≤ 1e-4)", outs, grads)
	}
	bf16 := testCUDADevice(t, cuda.MathBF16)
	one, _ := bf16.newEngine(cfg, w32, DefaultLearnerConfig())
	split, _ := bf16.newEngine(cfg, w32, DefaultLearnerConfig())
	split.(*cudaEngine).net.headBudget = 3 * cfg.Vocab
	g := [2][]float32{}
	for i, e := range []Engine{one, split} {
		n := len(large.Seqs) * large.width()
		dlp, dH := randomUpstream(rand.New(rand.NewPCG(3, 3)), large)
		e.ZeroGrad()
		if err := errors.Join(e.Forward(large, 0.7, make([]float64, n), make([]float64, n)), e.Backward(dlp, dH)); err != nil {
			t.Fatal(err)
		}
		g[i] = make([]float32, cfg.NumParams())
		e.ReadGrads(g[i], 0)
	}
	if e, at := gradError(cfg, g[1], to64(g[0])); e > 1e-5 {
		t.Errorf("bf16: the lm_head in blocks changes the gradient of %s by %.3g of its largest", at, e)
	}
}

// cudaTrainRun trains the tiny preset (Hugging Face initialisation) for
// steps MaxEnt-GRPO steps on dev (nil: the CPU) and returns each step's
// loss, gradient norm and mean entropy, and the final weights. The loss
// is the supervised one plus the MaxEnt loss, so that its value moves
// with the log-probs (a policy loss's value is the advantages').
func cudaTrainRun(t *testing.T, dev Device, steps int) ([][3]float64, []float32) {
	t.Helper()
	cfg, _ := Preset("tiny")
	m, err := NewModel(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	lc := DefaultLearnerConfig()
	lc.Device = dev
	l, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	var stats [][3]float64
	for range steps {
		b := Batch{Seqs: contractSeqs(rng, cfg.Vocab)}
		lb := b.LossBatch()
		for range b.Seqs {
			lb.Advantages = append(lb.Advantages, rng.NormFloat64())
		}
		st, err := l.Step(b, 1, func(lp, ent []float64) (loss.Result, error) {
			return sumLosses(loss.MaxEntEntropy(loss.Default(), lb, lp, ent, 1, cfg.Vocab))(loss.Supervised(lb, lp))
		})
		if err != nil {
			t.Fatal(err)
		}
		stats = append(stats, [3]float64{st.Loss, st.GradNorm, st.MeanEntropy})
	}
	return stats, l.Snapshot().Weights()
}

// sumLosses adds two loss results (value and gradients).
func sumLosses(a loss.Result, errA error) func(loss.Result, error) (loss.Result, error) {
	return func(b loss.Result, errB error) (loss.Result, error) {
		if err := errors.Join(errA, errB); err != nil {
			return loss.Result{}, err
		}
		a.Loss += b.Loss
		for i := range a.DLogp {
			a.DLogp[i] += b.DLogp[i]
		}
		return a, nil
	}
}

// TestCUDAEngineTracksCPU: 20 learner steps on the CUDA engine, with the
// products of DTypeFloat32 (TF32) and DTypeBF16, give the CPU engine's
// losses, gradient norms and mean entropies, each within a tolerance of
// its precision (relative to max(1, |x|)).
func TestCUDAEngineTracksCPU(t *testing.T) {
	want, _ := cudaTrainRun(t, nil, 20)
	for _, tc := range []struct {
		math cuda.Math
		tol  float64
	}{{cuda.MathTF32, 1e-3}, {cuda.MathBF16, 1e-2}} { // measured 1.4e-4, 1.1e-3
		got, _ := cudaTrainRun(t, testCUDADevice(t, tc.math), 20)
		worst := 0.0
		for i := range want {
			for j := range want[i] {
				worst = max(worst, math.Abs(got[i][j]-want[i][j])/max(1, math.Abs(want[i][j])))
			}
		}
		if worst > tc.tol {
			t.Errorf("%v: losses, gradient norms or entropies differ from the CPU engine's by up to %.3g (want ≤ %g)", tc.math, worst, tc.tol)
		}
		t.Logf("%v: 20 steps: losses, gradient norms and entropies within %.3g of the CPU engine's", tc.math, worst)
	}
}

// TestCUDAEngineDeterministic: two runs of one seed end with the same
// weights and losses, bit for bit (no float atomics; on the emulator the
// blocks run in order, so this checks the engine's own code, and on a GPU
// the kernels and cuBLAS too).
func TestCUDAEngineDeterministic(t *testing.T) {
	for _, m := range []cuda.Math{cuda.MathTF32, cuda.MathBF16} {
		l1, w1 := cudaTrainRun(t, testCUDADevice(t, m), 5)
		l2, w2 := cudaTrainRun(t, testCUDADevice(t, m), 5)
		if !slices.Equal(l1, l2) || !slices.Equal(w1, w2) { // bits: NaN would fail too
			t.Errorf("%v: two runs of one seed differ (losses %v, %v)", m, l1, l2)
		}
	}
}

// TestCUDAEngineRefusesMemory: a learner whose weights, or a batch whose
// activations, need more than the device's free memory is refused before
// anything is allocated, with one line naming what it needs and what is
// free. It counts the allocations made through the runtime: the device's
// free memory, which it checked first, moves with other processes on the
// GPU (on an H200 it fell while a cluster benchmark ran beside the tests).
func TestCUDAEngineRefusesMemory(t *testing.T) {
	rt := &countingRuntime{Runtime: cudatest.Open(t)}
	dev := newCUDADevice(rt, cuda.MathTF32, false)
	huge := Config{Vocab: 1 << 20, Hidden: 8192, Layers: 8, Heads: 64, KVHeads: 8, MLP: 16384, Context: 64, RopeTheta: 1e4, NormEps: 1e-6}
	_, errBig := newCUDAEngine(dev, huge, nil, DefaultLearnerConfig()) // refused before w is read
	if n := rt.allocs.Load(); n != 0 {
		t.Errorf("a refused learner made %d allocations", n)
	}
	cfg, _ := Preset("base")
	cfg.Context = 8192
	eng, err := newCUDAEngine(dev, cfg, make([]float32, cfg.NumParams()), DefaultLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	seq := Sequence{Prompt: make([]int, 4096), Completion: make([]int, 4096)}
	b := Batch{Seqs: slices.Repeat([]Sequence{seq}, 1024)} // 8M rows: hundreds of GB
	n := len(b.Seqs) * b.width()
	before := rt.allocs.Load()
	errBatch := eng.Forward(b, 1, make([]float64, n), make([]float64, n))
	if n := rt.allocs.Load() - before; n != 0 {
		t.Errorf("a refused batch made %d allocations", n)
	}
	for _, err := range []error{errBig, errBatch} {
		msg := fmt.Sprint(err)
		if !errors.Is(err, ErrMemory) || !strings.Contains(msg, "needs") || !strings.Contains(msg, "free") || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line wrapping ErrMemory naming what it needs and what is free", msg)
		}
		t.Log(msg)
	}
}

// countingRuntime counts the allocations made through it.
type countingRuntime struct {
	cuda.Runtime
	allocs atomic.Int64
}

func (r *countingRuntime) Alloc(bytes int64) (cuda.Ptr, error) {
	r.allocs.Add(1)
	return r.Runtime.Alloc(bytes)
}

// TestCUDAEngineSmolLM2Shape: a forward and backward pass of the
// smollm2-135m preset (head width 64, 3 query heads per key/value head, a
// tied 49152-token head) on the CUDA engine against the float32 CPU
// engine, fp32 products (a 135M-parameter model: skipped with -short;
// qwen2.5-0.5b needs more host memory than the emulator's machines have,
// and runs in the GPU benchmark).
func TestCUDAEngineSmolLM2Shape(t *testing.T) {
	if testing.Short() {
		t.Skip("a 135M-parameter model on the emulator: minutes")
	}
	cfg, _ := Preset("smollm2-135m")
	w := make([]float32, cfg.NumParams())
	initWeights(w, cfg, 3)
	rng := rand.New(rand.NewPCG(3, 3))
	p := append([]int{1}, randomIDs(rng, 4, cfg.Vocab)...)
	b := Batch{Seqs: []Sequence{{Prompt: p, Completion: randomIDs(rng, 4, cfg.Vocab)}, {Prompt: p, Completion: randomIDs(rng, 3, cfg.Vocab)}}}
	dlp, dH := randomUpstream(rng, b)
	var lp, g [2][]float64
	for i, dev := range []Device{CPU{}, testCUDADevice(t, cuda.MathFP32)} {
		eng, err := dev.newEngine(cfg, w, DefaultLearnerConfig())
		if err != nil {
			t.Fatal(err)
		}
		n := len(b.Seqs) * b.width()
		lp[i] = make([]float64, 2*n)
		eng.ZeroGrad()
		if err := errors.Join(eng.Forward(b, 1, lp[i][:n], lp[i][n:]), eng.Backward(dlp, dH)); err != nil {
			t.Fatal(err)
		}
		g32 := make([]float32, cfg.NumParams())
		if err := eng.ReadGrads(g32, 0); err != nil {
			t.Fatal(err)
		}
		g[i] = to64(g32)
	}
	worst := 0.0
	for j := range lp[0] {
		worst = max(worst, math.Abs(lp[1][j]-lp[0][j])/max(1, math.Abs(lp[0][j])))
	}
	e, at := gradError(cfg, to32(g[1]), g[0])
	if worst > 1e-4 || e > 1e-4 {
		t.Errorf("against the CPU engine: outputs off by %.3g (want ≤ 1e-4), gradient of %s by %.3g of its largest (want ≤ 1e-4)", worst, at, e)
	}
	t.Logf("against the CPU engine: outputs %.3g, gradients %.3g (%s)", worst, e, at)
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// TestCUDABench: Bench on the CUDA device (what `mgrpo-node bench --device
// cuda` runs on a GPU) times the learner step and scoring on the device,
// with and without sampling.
func TestCUDABench(t *testing.T) {
	for _, skip := range []bool{true, false} {
		r, err := Bench("tiny", BenchOptions{Batch: 4, PromptLen: 3, NewTokens: 3, MinTime: time.Millisecond, Reps: 1,
			Device: testCUDADevice(t, cuda.MathBF16), SkipSample: skip})
		if err != nil {
			t.Fatal(err)
		}
		if !(r.LearnerStepSec > 0 && r.ScoreTokPerS > 0) || (r.SampleTokPerS > 0) == skip || !strings.Contains(r.Device, "bf16") {
			t.Errorf("skip sample %v: %+v", skip, r)
		}
	}
}

// learnerTracksCPU trains the small preset 3 supervised steps on dev (TF32
// products) and on the CPU from the same weights: the losses agree within
// 1e-3 (relative), the weights as the contract's reduced mode has them
// (within 5e-2·lr but for 2%).
func learnerTracksCPU(t *testing.T, dev Device) {
	cfg, _ := Preset("small")
	cpu, gpu, lc := twinLearners(t, cfg, dev)
	seqs := randomSeqs(rand.New(rand.NewPCG(1, 2)), 32, 8, 8, cfg.Vocab)
	for step := 1; step <= 3; step++ {
		want, err := cpu.SupervisedStep(seqs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gpu.SupervisedStep(seqs)
		if err != nil {
			t.Fatal(err)
		}
		if !closeTo(got.Loss, want.Loss, 1e-3) {
			t.Errorf("step %d: loss on %s %.6f, on the CPU %.6f", step, dev.Name(), got.Loss, want.Loss)
		}
		t.Logf("step %d: loss %.7f, CPU %.7f", step, got.Loss, want.Loss)
	}
	c := engineContract{dev: dev, tol: 5e-3, reduced: true}
	if err := c.weightsAfterSteps(gpu.Snapshot().Weights(), cpu.Snapshot().Weights(), lc.LR); err != nil {
		t.Errorf("weights after 3 steps: %v", err)
	}
}

// twinLearners returns two learners of a random cfg model with the
// default learner configuration, one on the CPU and one on dev, and dev's
// configuration.
func twinLearners(t *testing.T, cfg Config, dev Device) (cpu, onDev *Learner, lc LearnerConfig) {
	t.Helper()
	m, err := NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	lc = DefaultLearnerConfig()
	if cpu, err = NewLearner(m, lc); err != nil {
		t.Fatal(err)
	}
	lc.Device = dev
	if onDev, err = NewLearner(m, lc); err != nil {
		t.Fatal(err)
	}
	return cpu, onDev, lc
}

// TestCUDALearnerTracksCPU is TestLearnerOnCUDA (device_cuda_test.go) on
// the build's runtime: the emulator here.
func TestCUDALearnerTracksCPU(t *testing.T) {
	learnerTracksCPU(t, testCUDADevice(t, cuda.MathTF32))
}

// TestCUDALearnerReserve: Learner.Reserve refuses a batch shape whose
// workspace the device cannot hold, with one line and nothing allocated,
// and sizes it for one it can, so that a step of that shape allocates
// nothing more; a CPU learner has nothing to reserve.
func TestCUDALearnerReserve(t *testing.T) {
	dev := testCUDADevice(t, cuda.MathTF32)
	freeNow := func() int64 {
		free, _, err := dev.rt.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		return free
	}
	cfg, _ := Preset("base")
	cfg.Context = 8192
	cpu, l, _ := twinLearners(t, cfg, dev)
	seq := Sequence{Prompt: make([]int, 4096), Completion: make([]int, 4096)}
	huge := Batch{Seqs: slices.Repeat([]Sequence{seq}, 1024)} // 8M rows: hundreds of GB
	free := freeNow()
	err := l.Reserve(huge)
	if msg := fmt.Sprint(err); !errors.Is(err, ErrMemory) || !strings.Contains(msg, "needs") || strings.Contains(msg, "\n") {
		t.Errorf("reserve of a batch too large: %q, want one line wrapping ErrMemory", msg)
	}
	if freeNow() < free {
		t.Error("a refused reservation allocated")
	}
	if err := cpu.Reserve(huge); err != nil {
		t.Errorf("a CPU learner's reservation: %v", err)
	}
	seqs := randomSeqs(rand.New(rand.NewPCG(3, 4)), 16, 8, 8, cfg.Vocab)
	if err := l.Reserve(Batch{Seqs: seqs}); err != nil {
		t.Fatal(err)
	}
	reserved := freeNow()
	if _, err := l.SupervisedStep(seqs); err != nil {
		t.Fatal(err)
	}
	if now := freeNow(); now < reserved {
		t.Errorf("a step within the reserved shape allocated %d bytes more", reserved-now)
	}
}
