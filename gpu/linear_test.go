package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// hostSgemm is an sgemmer on the CPU (the build's BLAS) that counts its
// calls and, when failAt > 0, fails call number failAt: a stand-in for
// cuda.BLAS, so the device path of the model runs without a GPU.
type hostSgemm struct {
	calls, failAt int
}

var errDeviceFault = errors.New("test device fault")

func (h *hostSgemm) Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) error {
	h.calls++
	if h.calls == h.failAt {
		return fmt.Errorf("sgemm %d: %w", h.calls, errDeviceFault)
	}
	blas32Impl.Sgemm(trans(tA), trans(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return nil
}

// hostDevice is a Device whose weight products go through a hostSgemm.
type hostDevice struct{ s *hostSgemm }

func (hostDevice) Name() string { return "host" }
func (hostDevice) Info() string { return "host: CPU sgemm behind the device seam" }
func (hostDevice) Close() error { return nil }

// newEngine is the cuda device's stopgap: the CPU engine with its weight
// products on the (host) device.
func (d hostDevice) newEngine(cfg Config, w []float32, lc LearnerConfig) (Engine, error) {
	return newCPUEngine(cfg, w, lc, &deviceLinear{dev: d.s})
}

func (hostDevice) newModelEngine(cfg Config, w []float32) (ModelEngine, error) {
	return CPU{}.newModelEngine(cfg, w)
}

func randomFloats(rng *rand.Rand, n int) (s []float32) {
	s = make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestDeviceLinearMatchesCPU checks the arguments deviceLinear hands a
// device (the calls the CUDA path makes) against the CPU kernels, for each
// product, with and without accumulation.
func TestDeviceLinearMatchesCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, in, out = 37, 11, 6
	x, w, dy := randomFloats(rng, n*in), randomFloats(rng, out*in), randomFloats(rng, n*out)
	cpu, dev := cpuLinear[float32]{workers: 3}, &deviceLinear{dev: &hostSgemm{}}
	for _, tc := range []struct {
		name string
		size int
		run  func(l linear[float32], dst []float32)
	}{
		{"NT", n * out, func(l linear[float32], dst []float32) { l.NT(dst, x, w, n, in, out, false) }},
		{"NT accumulate", n * out, func(l linear[float32], dst []float32) { l.NT(dst, x, w, n, in, out, true) }},
		{"NN", n * in, func(l linear[float32], dst []float32) { l.NN(dst, dy, w, n, in, out, false) }},
		{"NN accumulate", n * in, func(l linear[float32], dst []float32) { l.NN(dst, dy, w, n, in, out, true) }},
		{"TNAdd", out * in, func(l linear[float32], dst []float32) { l.TNAdd(dst, dy, x, n, in, out) }},
	} {
		start := randomFloats(rng, tc.size)
		want, got := append([]float32(nil), start...), append([]float32(nil), start...)
		tc.run(cpu, want)
		tc.run(dev, got)
		if err := dev.Err(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s: [%d] = %v, CPU kernel gives %v", tc.name, i, got[i], want[i])
			}
		}
	}
}

// TestLearnerOnDevice trains the same model on the CPU and through the
// device seam: every weight product of forward and backward goes to the
// device (3·(4L+1) per step), and losses, scores and weights agree.
func TestLearnerOnDevice(t *testing.T) {
	m, cpu := newTinyLearner(t, 3e-3)
	s := &hostSgemm{}
	lc := DefaultLearnerConfig()
	lc.LR = 3e-3
	lc.Device = hostDevice{s}
	dev, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	seqs := randomSeqs(rand.New(rand.NewPCG(5, 6)), 6, 4, 5, m.Config().Vocab)
	perStep := 3 * (4*m.Config().Layers + 1)
	for step := 1; step <= 3; step++ {
		want, err := cpu.SupervisedStep(seqs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.SupervisedStep(seqs)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Loss-want.Loss) > 1e-5 || math.Abs(got.GradNorm-want.GradNorm) > 1e-4*want.GradNorm {
			t.Errorf("step %d: device loss %.7f grad norm %.6f, CPU %.7f %.6f", step, got.Loss, got.GradNorm, want.Loss, want.GradNorm)
		}
		if s.calls != step*perStep {
			t.Errorf("step %d: %d device products, want %d", step, s.calls, step*perStep)
		}
	}
	wd, wc := dev.Snapshot().Weights(), cpu.Snapshot().Weights()
	for i := range wd {
		if math.Abs(float64(wd[i]-wc[i])) > 1e-5 {
			t.Fatalf("weight %d: device %v, CPU %v", i, wd[i], wc[i])
		}
	}
	sd, err := dev.Score(seqs, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := cpu.Score(seqs, 0.7)
	for b := range sd {
		for j := range sd[b].LogProbs {
			if math.Abs(sd[b].LogProbs[j]-sc[b].LogProbs[j]) > 1e-4 {
				t.Fatalf("score seq %d token %d: device %v, CPU %v", b, j, sd[b].LogProbs[j], sc[b].LogProbs[j])
			}
		}
	}
}

// TestLearnerDeviceFault: a product that fails on the device, in the
// forward or the backward pass, fails the step with the device's error and
// leaves weights and version as they were; the next step works again.
func TestLearnerDeviceFault(t *testing.T) {
	m, _ := newTinyLearner(t, 3e-3)
	perStep := 3 * (4*m.Config().Layers + 1)
	seqs := randomSeqs(rand.New(rand.NewPCG(7, 8)), 4, 4, 5, m.Config().Vocab)
	for _, tc := range []struct {
		name   string
		failAt int
		stage  string
	}{
		{"first forward product", 1, "forward"},
		{"lm_head", perStep / 3, "forward"},
		{"first backward product", perStep/3 + 1, "backward"},
		{"last backward product", perStep, "backward"},
	} {
		s := &hostSgemm{failAt: tc.failAt}
		lc := DefaultLearnerConfig()
		lc.Device = hostDevice{s}
		l, err := NewLearner(m, lc)
		if err != nil {
			t.Fatal(err)
		}
		before := l.Snapshot().Weights()
		_, err = l.SupervisedStep(seqs)
		if !errors.Is(err, errDeviceFault) || !strings.Contains(err.Error(), tc.stage) {
			t.Errorf("%s: error %v, want the device fault in the %s pass", tc.name, err, tc.stage)
		}
		if l.Version() != 0 || !slices.Equal(l.Snapshot().Weights(), before) {
			t.Errorf("%s: version %d and weights changed by a failed step", tc.name, l.Version())
		}
		if _, err := l.SupervisedStep(seqs); err != nil || l.Version() != 1 {
			t.Errorf("%s: step after the fault: %v (version %d)", tc.name, err, l.Version())
		}
	}
}
