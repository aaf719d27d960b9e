package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/loss"
)

// The engine contract: what every Engine and ModelEngine must do, run
// against each device (runEngineContract). The CPU engine runs it here,
// the CPU engine with its products behind the old device seam through a
// host stand-in for cuBLAS (hostDevice), and the CUDA engine on the
// emulator (-tags cudaemu) or the GPU (-tags cuda: cuda_engine_test.go);
// a new engine passes it before it is used.

// engineContract is a device under the contract.
type engineContract struct {
	dev Device
	// tol bounds the device's log-probs and entropies against the
	// float64 oracle (relative to max(1, |value|)) and its gradients
	// (relative to each tensor's largest), and its step's loss, gradient
	// norm and mean entropy against the CPU engine's (10·tol). The CPU's
	// float32 worst on these shapes is 2.3e-5 and 2.1e-5 (pure Go and
	// OpenBLAS): 5e-5 for float32; TF32 or bf16 products need their own.
	tol float64
	// reduced marks products in reduced precision (TF32, bf16). The
	// oracle and the learners then run on Hugging Face-initialised
	// weights (hfWeights: std 0.02) instead of testNet's (std 0.2),
	// through which the products' input rounding grows some 30-fold;
	// what only float32 rounding separates on a float32 engine
	// (micro-batches against the whole batch, whose shared prompts round
	// a sum of gradients where single sequences round its terms; Score
	// against Sample, which may run at another precision) is held to tol;
	// and the weights after AdamW steps agree within max(adamTol,
	// 10·tol)·lr but for a fraction reducedAdamFrac of them (AdamW moves
	// a weight whose gradient is within rounding of zero by up to lr
	// either way).
	reduced bool
}

// reducedAdamFrac is the fraction of weights whose AdamW steps may go
// another way under reduced-precision products (see engineContract).
const reducedAdamFrac = 0.02

// weights are the weights of the oracle checks and learners of c: testNet's
// (oracleWeights), or Hugging Face's initialisation for reduced precision,
// with Qwen's biases and q/k norm weights drawn (std 0.1 about 0 and 1)
// instead of zeros and ones, under which a missing bias or a norm weight
// read from the wrong place would hide.
func (c engineContract) weights(cfg Config, seed uint64) ([]float64, []float32) {
	if !c.reduced {
		return oracleWeights(cfg, seed)
	}
	w32 := make([]float32, cfg.NumParams())
	initWeights(w32, cfg, seed)
	rng := rand.New(rand.NewPCG(seed, 28))
	for _, s := range newLayout(cfg).specs {
		qk := strings.HasSuffix(s.Name, "q_norm.weight") || strings.HasSuffix(s.Name, "k_norm.weight")
		for i := s.Offset; i < s.Offset+s.Size() && (s.Bias || qk); i++ {
			w32[i] += float32(0.1 * rng.NormFloat64())
		}
	}
	w64 := make([]float64, len(w32))
	for i, v := range w32 {
		w64[i] = float64(v)
	}
	return w64, w32
}

// exactTol is the tolerance of what only float32 rounding separates on a
// float32 engine (want): c.tol for reduced precision.
func (c engineContract) exactTol(want float64) float64 {
	if c.reduced {
		return max(want, c.tol)
	}
	return want
}

// weightsAfterSteps reports how two runs' weights after AdamW steps at lr
// differ: an error when any differs by more than adamTol·lr or, for
// reduced precision, more than a fraction reducedAdamFrac by more than
// max(adamTol, 10·tol)·lr.
func (c engineContract) weightsAfterSteps(got, want []float32, lr float64) error {
	off, worst, tol, allowed := 0, 0.0, adamTol, 0
	if c.reduced {
		tol, allowed = max(adamTol, 10*c.tol), int(reducedAdamFrac*float64(len(got)))
	}
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		worst = max(worst, d)
		if d > tol*lr {
			off++
		}
	}
	if off > allowed {
		return fmt.Errorf("%d of %d weights differ by more than %g·lr (at most %d may), the worst by %.3g (lr %g)", off, len(got), tol, allowed, worst, lr)
	}
	return nil
}

// contractConfigs are the shapes the oracle checks run on: the presets,
// grouped-query attention (3 query heads per key/value head, head width
// 32), and the other decoder families: Qwen2 (q/k/v biases, tied), Qwen3
// (q/k norms, head width 32 with H·E = 2D as Qwen3's) and Llama 3's RoPE
// scaling.
func contractConfigs() []Config {
	var cs []Config
	for _, name := range []string{"tiny", "small", "base"} {
		c, _ := Preset(name)
		cs = append(cs, c)
	}
	gqa := Config{Vocab: 98, Hidden: 192, Layers: 2, Heads: 6, KVHeads: 2, MLP: 96, Context: 64, RopeTheta: 10000, NormEps: 1e-6}
	return append(cs, gqa, contractArch(ArchQwen2), contractArch(ArchQwen3), contractArch("llama3-rope"))
}

// contractArch is a small grouped-query model of another family: "qwen2",
// "qwen3" (head width 32 of hidden 64, 4 heads), "mistral" (untied) or
// "llama3-rope".
func contractArch(arch string) Config {
	c := Config{Vocab: 98, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, MLP: 128, Context: 64, RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true}
	switch arch {
	case ArchQwen2:
		c.Arch = arch
	case ArchMistral:
		c.Arch, c.TieEmbeddings = arch, false
	case ArchQwen3:
		c.Arch, c.HeadWidth = arch, 32
	default:
		c.RopeTheta, c.TieEmbeddings = 500000, false
		c.RopeScaling = RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 16}
	}
	return c
}

// contractName names a contract config in messages.
func contractName(c Config) string {
	name := fmt.Sprintf("D%d L%d H%d G%d E%d", c.Hidden, c.Layers, c.Heads, c.KVHeads, c.HeadDim())
	switch {
	case c.Arch != "":
		name += " " + c.Arch
	case c.RopeScaling.enabled():
		name += " llama3-rope"
	}
	return name
}

// contractSeqs is a batch of groups of completions sharing prompts (one
// without a completion), then single sequences: every layout planRows has.
func contractSeqs(rng *rand.Rand, vocab int) []Sequence {
	ids := func(n int) []int { return randomIDs(rng, n, vocab) }
	var seqs []Sequence
	for g, n := range []int{3, 1, 4} {
		p := append([]int{1}, ids(2+3*g)...)
		for j := 0; j < n; j++ {
			seqs = append(seqs, Sequence{Prompt: p, Completion: ids((j*5+g)%9 + g%2)})
		}
	}
	for j := 0; j < 3; j++ {
		seqs = append(seqs, Sequence{Prompt: append([]int{1}, ids(j)...), Completion: ids(1 + 4*j)})
	}
	return seqs
}

// oracleWeights are testNet's float64 weights (matrices of std 0.2, norm
// weights around 1) and their float32 rounding.
func oracleWeights(c Config, seed uint64) ([]float64, []float32) {
	w64 := testNet(c, seed).w.flat
	w32 := make([]float32, len(w64))
	for i, v := range w64 {
		w32[i] = float32(v)
		w64[i] = float64(w32[i]) // the oracle runs on exactly the engine's weights
	}
	return w64, w32
}

// randomUpstream returns per-token gradients on b's completion slots.
func randomUpstream(rng *rand.Rand, b Batch) (dlp, dH []float64) {
	w := b.width()
	dlp, dH = make([]float64, len(b.Seqs)*w), make([]float64, len(b.Seqs)*w)
	for i, s := range b.Seqs {
		for t := range s.Completion {
			dlp[i*w+t], dH[i*w+t] = rng.NormFloat64(), rng.NormFloat64()
		}
	}
	return dlp, dH
}

func runEngineContract(t *testing.T, c engineContract) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, engineContract)
	}{
		{"forward and gradients against float64", contractOracle},
		{"clip", contractClip},
		{"backward needs a forward", contractBackwardNeedsForward},
		{"training step", contractStep},
		{"micro-batches", contractMicroBatches},
		{"snapshot is immutable", contractSnapshot},
		{"weights in and out", contractWeights},
		{"optimizer state round trip", contractOptimizerState},
		{"bad update rolled back", contractRollback},
		{"non-finite gradient", contractNonFinite},
		{"score is sample's log-probs", contractScoreSample},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, c) })
	}
}

func TestCPUEngineContract(t *testing.T) {
	runEngineContract(t, engineContract{dev: CPU{}, tol: 5e-5})
}

// TestHostDeviceEngineContract runs the contract on the CPU engine with its
// products behind the device seam (linear.go's deviceLinear, the old cuda
// stopgap's), on the CPU.
func TestHostDeviceEngineContract(t *testing.T) {
	runEngineContract(t, engineContract{dev: hostDevice{&hostSgemm{}}, tol: 5e-5})
}

// contractOracle: Forward's log-probs and entropies and Backward's
// gradients against the float64 CPU trainer on the same weights.
func contractOracle(t *testing.T, c engineContract) {
	for _, cfg := range contractConfigs() {
		name := contractName(cfg)
		rng := rand.New(rand.NewPCG(uint64(cfg.Hidden), 5))
		b := Batch{Seqs: contractSeqs(rng, cfg.Vocab), Width: 12}
		dlp, dH := randomUpstream(rng, b)
		w64, w32 := c.weights(cfg, 17)
		eng, err := c.dev.newEngine(cfg, w32, DefaultLearnerConfig())
		if err != nil {
			t.Fatal(err)
		}
		oracle := newCPUTrainer(cfg, w64, 2, 2, nil)
		n := len(b.Seqs) * b.Width
		lp, ent, lp64, ent64 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		for _, p := range []passes{eng, oracle} {
			p.ZeroGrad()
		}
		if err := eng.Forward(b, 0.8, lp, ent); err != nil {
			t.Fatal(err)
		}
		if err := eng.Backward(dlp, dH); err != nil {
			t.Fatal(err)
		}
		oracle.Forward(b, 0.8, lp64, ent64)
		oracle.Backward(dlp, dH)
		worst := 0.0
		for i := range lp {
			worst = max(worst, math.Abs(lp[i]-lp64[i])/max(1, math.Abs(lp64[i])), math.Abs(ent[i]-ent64[i])/max(1, ent64[i]))
		}
		if worst > c.tol {
			t.Errorf("%s: log-probs and entropies differ from float64 by %.3g (want ≤ %g)", name, worst, c.tol)
		}
		g := make([]float32, cfg.NumParams())
		if err := eng.ReadGrads(g, 0); err != nil {
			t.Fatal(err)
		}
		e, at := gradError(cfg, g, oracle.grad.flat)
		if e > c.tol {
			t.Errorf("%s: gradient of %s differs from float64 by %.3g of the tensor's largest (want ≤ %g)", name, at, e, c.tol)
		}
		t.Logf("%s: worst error against float64: outputs %.3g, gradients %.3g (%s)", name, worst, e, at)
	}
}

// gradError is the worst error of g against want, relative to each
// tensor's largest gradient, and that tensor's name.
func gradError[G Float](cfg Config, g []G, want []float64) (worst float64, at string) {
	for _, s := range newLayout(cfg).specs {
		scale := 0.0
		for _, v := range want[s.Offset : s.Offset+s.Size()] {
			scale = max(scale, math.Abs(v))
		}
		for i := s.Offset; i < s.Offset+s.Size(); i++ {
			if e := math.Abs(float64(g[i])-want[i]) / scale; e > worst {
				worst, at = e, s.Name
			}
		}
	}
	return worst, at
}

// contractEngine returns an engine of the tiny preset on c's device with
// a forward and backward pass of a grouped batch behind it.
func contractEngine(t *testing.T, c engineContract, lc LearnerConfig) (Engine, Config, Batch) {
	t.Helper()
	cfg, _ := Preset("tiny")
	_, w := c.weights(cfg, 3)
	eng, err := c.dev.newEngine(cfg, w, lc)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	b := Batch{Seqs: contractSeqs(rng, cfg.Vocab)}
	n := len(b.Seqs) * b.width()
	dlp, dH := randomUpstream(rng, b)
	eng.ZeroGrad()
	if err := eng.Forward(b, 1, make([]float64, n), make([]float64, n)); err != nil {
		t.Fatal(err)
	}
	if err := eng.Backward(dlp, dH); err != nil {
		t.Fatal(err)
	}
	return eng, cfg, b
}

// contractClip: the norm before clipping is that of ReadGrads, and
// clipping scales the gradients by maxNorm/(norm+1e-6), only when the
// norm is above maxNorm.
func contractClip(t *testing.T, c engineContract) {
	eng, cfg, _ := contractEngine(t, c, DefaultLearnerConfig())
	g := make([]float32, cfg.NumParams())
	eng.ReadGrads(g, 0)
	var ss float64
	for _, v := range g {
		ss += float64(v) * float64(v)
	}
	want := math.Sqrt(ss)
	for _, maxNorm := range []float64{0, 2 * want, want / 3} {
		norm, err := eng.ClipGradNorm(maxNorm)
		if err != nil || math.Abs(norm-want) > 1e-5*want {
			t.Errorf("max %g: norm %g, %v; want %g", maxNorm, norm, err, want)
		}
	}
	got := make([]float32, len(g))
	eng.ReadGrads(got, 0)
	scale := (want / 3) / (want + 1e-6)
	for i := range g {
		if math.Abs(float64(got[i])-scale*float64(g[i])) > 1e-6*math.Abs(float64(g[i]))+1e-12 {
			t.Fatalf("gradient %d after clipping to a third: %g, want %g", i, got[i], scale*float64(g[i]))
		}
	}
	eng.ZeroGrad()
	if norm, _ := eng.ClipGradNorm(0); norm != 0 {
		t.Errorf("norm %g after ZeroGrad", norm)
	}
}

// contractBackwardNeedsForward: Backward without a Forward to
// differentiate (none yet, or a Score since) is an error.
func contractBackwardNeedsForward(t *testing.T, c engineContract) {
	cfg, _ := Preset("tiny")
	_, w := c.weights(cfg, 3)
	eng, err := c.dev.newEngine(cfg, w, DefaultLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Seqs: contractSeqs(rand.New(rand.NewPCG(1, 1)), cfg.Vocab)}
	n := len(b.Seqs) * b.width()
	if err := eng.Backward(make([]float64, n), nil); err == nil {
		t.Error("Backward before any Forward: no error")
	}
	eng.Forward(b, 1, make([]float64, n), make([]float64, n))
	eng.Score(b, 1, make([]float64, n), make([]float64, n))
	if err := eng.Backward(make([]float64, n), nil); err == nil {
		t.Error("Backward after Score: no error")
	}
}

// contractLearner returns a learner of the tiny preset (oracle weights)
// on c's device, and the same on the CPU engine as a reference.
func contractLearner(t *testing.T, c engineContract, lc LearnerConfig) (dev, ref *Learner, b Batch, lossFn LossFunc) {
	t.Helper()
	cfg, _ := Preset("tiny")
	return contractLearnerOf(t, c, lc, cfg)
}

// contractLearnerOf is contractLearner for a model of configuration cfg.
func contractLearnerOf(t *testing.T, c engineContract, lc LearnerConfig, cfg Config) (dev, ref *Learner, b Batch, lossFn LossFunc) {
	t.Helper()
	_, w := c.weights(cfg, 9)
	m, err := NewModelFromWeights(cfg, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref, err = NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	lc.Device = c.dev
	if dev, err = NewLearner(m, lc); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 6))
	b = Batch{Seqs: contractSeqs(rng, cfg.Vocab)}
	lb := b.LossBatch()
	lb.Advantages = make([]float64, len(b.Seqs))
	for i := range lb.Advantages {
		lb.Advantages[i] = rng.NormFloat64()
	}
	lossFn = func(lp, ent []float64) (loss.Result, error) {
		return loss.MaxEntEntropy(loss.Default(), lb, lp, ent, 1, cfg.Vocab)
	}
	return dev, ref, b, lossFn
}

// contractStep: learner steps on the device track the CPU engine's
// (losses, gradient norms, weights), and count versions and steps, on the
// tiny preset and on a Qwen2 and a Qwen3 model.
func contractStep(t *testing.T, c engineContract) {
	tiny, _ := Preset("tiny")
	for _, cfg := range []Config{tiny, contractArch(ArchQwen2), contractArch(ArchQwen3)} {
		t.Run(contractName(cfg), func(t *testing.T) { contractStepOf(t, c, cfg) })
	}
}

// contractStepOf is contractStep on one model. AdamW's eps is 1e-6: its
// first step moves a weight by lr·g/(|g|+eps), so with 1e-8 a gradient
// within float32 rounding of zero (the Qwen3 model has one of 6e-10) moves
// its weight by a fraction of lr that the rounding decides.
func contractStepOf(t *testing.T, c engineContract, cfg Config) {
	lc := DefaultLearnerConfig()
	lc.LR, lc.Eps = 3e-3, 1e-6
	dev, ref, b, lossFn := contractLearnerOf(t, c, lc, cfg)
	for step := 1; step <= 3; step++ {
		got, err := dev.Step(b, 0.9, lossFn)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Step(b, 0.9, lossFn)
		if !closeTo(got.Loss, want.Loss, 10*c.tol) || !closeTo(got.GradNorm, want.GradNorm, 10*c.tol) || !closeTo(got.MeanEntropy, want.MeanEntropy, 10*c.tol) {
			t.Errorf("step %d: loss %.7g grad norm %.7g entropy %.7g; CPU %.7g %.7g %.7g", step, got.Loss, got.GradNorm, got.MeanEntropy, want.Loss, want.GradNorm, want.MeanEntropy)
		}
		if got.Version != int64(step) || dev.eng.Steps() != step || got.Tokens != want.Tokens || got.Sequences != len(b.Seqs) {
			t.Errorf("step %d: version %d, %d optimiser steps, %d tokens, %d sequences", step, got.Version, dev.eng.Steps(), got.Tokens, got.Sequences)
		}
	}
	if err := c.weightsAfterSteps(dev.Snapshot().Weights(), ref.Snapshot().Weights(), lc.LR); err != nil {
		t.Errorf("weights after 3 steps against the CPU engine's: %v", err)
	}
}

// closeTo reports whether got is within tol of want, relative to max(1, |want|).
func closeTo(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*max(1, math.Abs(want))
}

// contractMicroBatches: in micro-batches of 1 and 3 sequences, a step's
// loss, gradients (before clipping), gradient norm and updated weights
// are the whole batch's.
func contractMicroBatches(t *testing.T, c engineContract) {
	lc := DefaultLearnerConfig()
	lc.LR = 3e-3
	whole, _, b, lossFn := contractLearner(t, c, lc)
	g32, lossWant := accumulated(t, whole.eng, b, 0, lossFn)
	gWant := make([]float64, len(g32))
	for i, v := range g32 {
		gWant[i] = float64(v)
	}
	want, err := whole.Step(b, 0.9, lossFn)
	if err != nil {
		t.Fatal(err)
	}
	for _, micro := range []int{1, 3, len(b.Seqs)} {
		lc.MicroBatch = micro
		l, _, _, _ := contractLearner(t, c, lc)
		g, lossGot := accumulated(t, l.eng, b, micro, lossFn)
		if e, at := gradError(l.cfg, g, gWant); e > c.exactTol(1e-5) || !closeTo(lossGot, lossWant, c.exactTol(1e-6)) {
			t.Errorf("micro-batch %d: loss %.9g (whole batch %.9g); gradient of %s off by %.3g of the tensor's largest", micro, lossGot, lossWant, at, e)
		}
		got, err := l.Step(b, 0.9, lossFn)
		if err != nil {
			t.Fatal(err)
		}
		if !closeTo(got.Loss, want.Loss, c.exactTol(1e-6)) || !closeTo(got.GradNorm, want.GradNorm, c.exactTol(1e-5)) || !closeTo(got.MeanEntropy, want.MeanEntropy, c.exactTol(1e-6)) {
			t.Errorf("micro-batch %d: loss %.9g grad norm %.9g entropy %.9g; whole batch %.9g %.9g %.9g", micro, got.Loss, got.GradNorm, got.MeanEntropy, want.Loss, want.GradNorm, want.MeanEntropy)
		}
		if err := c.weightsAfterSteps(l.Snapshot().Weights(), whole.Snapshot().Weights(), lc.LR); err != nil {
			t.Errorf("micro-batch %d: weights against the whole batch's: %v", micro, err)
		}
	}
}

// adamTol bounds, in learning rates, how far two float32 runs' weights
// may be apart after a few AdamW steps on gradients equal to float32
// rounding: AdamW moves a weight by about lr·g/(|g|+eps), so a gradient
// within rounding of zero may move its weight by up to lr either way.
// Measured: 1.5e-3 (micro-batches), 6e-3 (products behind the device seam).
const adamTol = 2e-2

// accumulated runs the forward passes, the loss and the backward passes
// of b on e in micro-batches of micro sequences, as a learner step does,
// and returns the gradients and the loss.
func accumulated(t *testing.T, e Engine, b Batch, micro int, lossFn LossFunc) ([]float32, float64) {
	t.Helper()
	n := len(b.Seqs) * b.width()
	g, err := forwardLoss(e, b, 0.9, micro, lossFn, make([]float64, n), make([]float64, n))
	if err != nil {
		t.Fatal(err)
	}
	if err := backprop(e, b, 0.9, micro, g, make([]float64, 2*n)); err != nil {
		t.Fatal(err)
	}
	cfg, _ := Preset("tiny")
	g32 := make([]float32, cfg.NumParams())
	if err := e.ReadGrads(g32, 0); err != nil {
		t.Fatal(err)
	}
	return g32, g.Loss
}

// contractSnapshot: a snapshot keeps its weights and scores while the
// learner steps on; a later one has the new weights and version.
func contractSnapshot(t *testing.T, c engineContract) {
	l, _, b, lossFn := contractLearner(t, c, DefaultLearnerConfig())
	s0 := l.Snapshot()
	w0 := s0.Weights()
	score0, err := s0.Score(b.Seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Step(b, 1, lossFn); err != nil {
		t.Fatal(err)
	}
	if got, _ := s0.Score(b.Seqs, 1); !reflect.DeepEqual(got, score0) || !slices.Equal(s0.Weights(), w0) {
		t.Error("a learner step changed an earlier snapshot's weights or scores")
	}
	s1 := l.Snapshot()
	if s0.Version() != 0 || s1.Version() != 1 || slices.Equal(s1.Weights(), w0) {
		t.Errorf("snapshot versions %d, %d (want 0, 1), or the step changed no weight", s0.Version(), s1.Version())
	}
	if got, _ := l.Score(b.Seqs, 1); !scoresClose(got, mustScore(t, s1, b.Seqs), 10*c.tol) {
		t.Error("the learner scores differently from its snapshot")
	}
}

func mustScore(t *testing.T, m *Model, seqs []Sequence) []TokenScores {
	t.Helper()
	s, err := m.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scoresClose(a, b []TokenScores, tol float64) bool {
	for i := range a {
		for j := range a[i].LogProbs {
			if !closeTo(a[i].LogProbs[j], b[i].LogProbs[j], tol) || !closeTo(a[i].Entropies[j], b[i].Entropies[j], tol) {
				return false
			}
		}
	}
	return len(a) == len(b)
}

// contractWeights: SetWeights and ReadWeights move the flat buffer
// exactly, whole or by range; a buffer of the wrong size is refused.
func contractWeights(t *testing.T, c engineContract) {
	l, _, b, _ := contractLearner(t, c, DefaultLearnerConfig())
	other, _ := NewModel(l.cfg, 77)
	if err := l.SetWeights(other); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Snapshot().Weights(), other.Weights()) {
		t.Error("SetWeights then Snapshot: weights differ from the model's")
	}
	head, shape, err := l.Snapshot().Tensor("model.norm.weight")
	want, _, _ := other.Tensor("model.norm.weight")
	if err != nil || !slices.Equal(head, want) || !slices.Equal(shape, []int{l.cfg.Hidden}) {
		t.Errorf("Tensor after SetWeights: %v, shape %v, err %v", head, shape, err)
	}
	if got, _ := l.Score(b.Seqs, 1); !scoresClose(got, mustScore(t, other, b.Seqs), 10*c.tol) {
		t.Error("after SetWeights the learner scores differently from the model")
	}
	if err := l.eng.SetWeights(make([]float32, 3)); err == nil {
		t.Error("SetWeights with 3 weights: no error")
	}
	if err := l.eng.ReadWeights(make([]float32, 4), l.cfg.NumParams()-3); err == nil {
		t.Error("ReadWeights past the end: no error")
	}
}

// contractOptimizerState: a learner restored from a snapshot and the saved
// optimiser state steps exactly as the one that saved them.
func contractOptimizerState(t *testing.T, c engineContract) {
	lc := DefaultLearnerConfig()
	lc.LR = 3e-3
	a, _, b, lossFn := contractLearner(t, c, lc)
	for i := 0; i < 2; i++ {
		if _, err := a.Step(b, 1, lossFn); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := a.SaveOptimizer(dir); err != nil {
		t.Fatal(err)
	}
	lc.Device = c.dev
	r, err := NewLearner(a.Snapshot(), lc)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.LoadOptimizer(dir); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		sa, _ := a.Step(b, 1, lossFn)
		sr, _ := r.Step(b, 1, lossFn)
		if sa.Loss != sr.Loss || sa.GradNorm != sr.GradNorm || sa.LR != sr.LR {
			t.Errorf("step %d after restoring: %+v, want %+v", i, sr, sa)
		}
	}
	if !slices.Equal(a.Snapshot().Weights(), r.Snapshot().Weights()) || r.eng.Steps() != 4 {
		t.Errorf("restored learner diverged (%d optimiser steps)", r.eng.Steps())
	}
}

// contractRollback: an update that would leave weights non-finite, or
// move them by more than MaxUpdateRatio times their norm, changes
// nothing, and the next good step is a fresh learner's.
func contractRollback(t *testing.T, c engineContract) {
	for _, tc := range []struct {
		name      string
		lr, ratio float64
		want      string
	}{
		{"non-finite", 1e308, 0, "would be NaN"},
		{"exploding", 10, 1, "the weights' norm"},
	} {
		lc := DefaultLearnerConfig()
		lc.LR, lc.MaxUpdateRatio = tc.lr, tc.ratio
		l, _, b, lossFn := contractLearner(t, c, lc)
		w0 := l.Snapshot().Weights()
		_, err := l.Step(b, 1, lossFn)
		if !errors.Is(err, ErrBadUpdate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrBadUpdate mentioning %q", tc.name, err, tc.want)
		}
		if l.Version() != 0 || l.eng.Steps() != 0 || !slices.Equal(l.Snapshot().Weights(), w0) {
			t.Errorf("%s: version %d, %d optimiser steps, or weights changed by a refused update", tc.name, l.Version(), l.eng.Steps())
		}
		lc.LR = 1e-3
		fresh, _, _, _ := contractLearner(t, c, lc)
		l.lc.Schedule.Base = 1e-3
		a, errA := l.Step(b, 1, lossFn)
		f, errF := fresh.Step(b, 1, lossFn)
		if errA != nil || errF != nil || a.Loss != f.Loss || !slices.Equal(l.Snapshot().Weights(), fresh.Snapshot().Weights()) {
			t.Errorf("%s: the step after a refused one differs from a fresh learner's (%v, %v)", tc.name, errA, errF)
		}
	}
}

// contractNonFinite: an infinite upstream gradient gives a non-finite
// gradient norm, refused as ErrNonFinite with nothing changed.
func contractNonFinite(t *testing.T, c engineContract) {
	l, _, b, _ := contractLearner(t, c, DefaultLearnerConfig())
	w0 := l.Snapshot().Weights()
	_, err := l.Step(b, 1, func(lp, _ []float64) (loss.Result, error) {
		d := make([]float64, len(lp))
		d[b.width()] = math.Inf(1) // sequence 1's first completion token
		return loss.Result{DLogp: d}, nil
	})
	if !errors.Is(err, ErrNonFinite) || l.Version() != 0 || l.eng.Steps() != 0 || !slices.Equal(l.Snapshot().Weights(), w0) {
		t.Errorf("infinite gradient: error %v, version %d, %d optimiser steps (want ErrNonFinite, nothing changed)", err, l.Version(), l.eng.Steps())
	}
}

// contractScoreSample: a snapshot's scores of its own samples are the
// log-probs and entropies Sample reported, on the tiny preset and on the
// other decoder families (the sampler's decoder is a pass of its own).
func contractScoreSample(t *testing.T, c engineContract) {
	tiny, _ := Preset("tiny")
	for _, cfg := range []Config{tiny, contractArch(ArchQwen2), contractArch(ArchQwen3), contractArch("llama3-rope")} {
		t.Run(contractName(cfg), func(t *testing.T) { contractScoreSampleOf(t, c, cfg) })
	}
}

func contractScoreSampleOf(t *testing.T, c engineContract, cfg Config) {
	l, _, _, _ := contractLearnerOf(t, c, DefaultLearnerConfig(), cfg)
	m := l.Snapshot()
	for _, opt := range []SampleOptions{
		{Temperature: 0.8, MaxNewTokens: 12, Seeds: PromptSeeds(3, 3)},
		{Temperature: 1.2, TopK: 5, TopP: 0.9, MaxNewTokens: 9, Seeds: PromptSeeds(4, 3)},
		{Greedy: true, MaxNewTokens: 7},
	} {
		out, err := m.Sample(samplePrompts, 3, opt)
		if err != nil {
			t.Fatal(err)
		}
		seqs := samplesAsSequences(samplePrompts, out)
		temp := opt.Temperature
		if opt.Greedy {
			temp = 1
		}
		sc, err := m.Score(seqs, temp)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range out {
			for j := range s.Tokens {
				if tol := c.exactTol(1e-4); math.Abs(s.LogProbs[j]-sc[i].LogProbs[j]) > tol || math.Abs(s.Entropies[j]-sc[i].Entropies[j]) > tol {
					t.Fatalf("%+v: sample %d token %d: sampled log-prob %g entropy %g, scored %g %g", opt, i, j, s.LogProbs[j], s.Entropies[j], sc[i].LogProbs[j], sc[i].Entropies[j])
				}
			}
		}
	}
}
