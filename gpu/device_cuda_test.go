//go:build cuda

package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLearnerOnCUDA needs a GPU (a cuda build does not start without one):
// `go test -tags cuda ./gpu/ -run CUDA`. The small preset trains a few
// steps on the CPU and on the GPU from the same weights; losses and
// weights agree to float32 rounding.
func TestLearnerOnCUDA(t *testing.T) {
	dev, err := OpenDevice("cuda")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	t.Log(dev.Info())
	cfg, _ := Preset("small")
	m, err := NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	lc := DefaultLearnerConfig()
	cpu, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	lc.Device = dev
	gpu, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
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
		if math.Abs(got.Loss-want.Loss) > 1e-4 {
			t.Errorf("step %d: loss on cuda %.6f, on cpu %.6f", step, got.Loss, want.Loss)
		}
	}
	wg, wc := gpu.Snapshot().Weights(), cpu.Snapshot().Weights()
	for i := range wg {
		if math.Abs(float64(wg[i]-wc[i])) > 1e-4 {
			t.Fatalf("weight %d: cuda %v, cpu %v", i, wg[i], wc[i])
		}
	}
}
