package gpu

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/loss"
)

// cpuOf returns the CPU engine of a learner made without a device.
func cpuOf(l *Learner) *cpuEngine { return l.eng.(*cpuEngine) }

// cpuModelOf returns the CPU engine of a model.
func cpuModelOf(m *Model) *cpuModel { return m.eng.(*cpuModel) }

// TestMicroBatchesExactFloat64: the float64 CPU trainer, in shards, gives
// a step's loss, per-token log-probs and entropies and every gradient in
// micro-batches of 1, 3 and 5 sequences as on the whole batch, to float64
// rounding: accumulation is exact by construction, not an approximation.
func TestMicroBatchesExactFloat64(t *testing.T) {
	gqa := Config{Vocab: 98, Hidden: 48, Layers: 2, Heads: 6, KVHeads: 2, MLP: 40, Context: 64, RopeTheta: 10000, NormEps: 1e-6}
	rng := rand.New(rand.NewPCG(8, 8))
	b := Batch{Seqs: contractSeqs(rng, gqa.Vocab)}
	lb := b.LossBatch()
	lb.Advantages = make([]float64, len(b.Seqs))
	for i := range lb.Advantages {
		lb.Advantages[i] = rng.NormFloat64()
	}
	var seen [][]float64 // lp, ent of the loss's call
	lossFn := func(lp, ent []float64) (loss.Result, error) {
		seen = [][]float64{lp, ent}
		return loss.MaxEntEntropy(loss.Default(), lb, lp, ent, 1, gqa.Vocab)
	}
	w64, _ := oracleWeights(gqa, 4)
	run := func(micro int) (float64, [][]float64, []float64) {
		tr := newCPUTrainer(gqa, append([]float64(nil), w64...), 3, 6, nil)
		n := len(b.Seqs) * b.width()
		g, err := forwardLoss(tr, b, 0.8, micro, lossFn, make([]float64, n), make([]float64, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := backprop(tr, b, 0.8, micro, g, make([]float64, 2*n)); err != nil {
			t.Fatal(err)
		}
		return g.Loss, seen, tr.grad.flat
	}
	wantLoss, wantOut, wantGrad := run(0)
	for _, micro := range []int{1, 3, 5} {
		l, out, grad := run(micro)
		if !closeTo(l, wantLoss, 1e-13) || maxDiff(out, wantOut) > 1e-12 {
			t.Errorf("micro-batch %d: loss %.17g (whole %.17g), outputs off by %.3g", micro, l, wantLoss, maxDiff(out, wantOut))
		}
		if e, at := gradError(gqa, grad, wantGrad); e > 1e-12 {
			t.Errorf("micro-batch %d: gradient of %s off by %.3g of the tensor's largest", micro, at, e)
		}
	}
}

func maxDiff(a, b [][]float64) float64 {
	d := 0.0
	for i := range a {
		for j := range a[i] {
			d = max(d, math.Abs(a[i][j]-b[i][j]))
		}
	}
	return d
}

// TestLargerWorkspaceSameResults: a pass in a workspace with more rows
// per sequence than the batch needs (a micro-batch in the workspace of a
// longer one) computes exactly what one of the batch's own shape does.
func TestLargerWorkspaceSameResults(t *testing.T) {
	cfg, _ := Preset("small")
	_, w := oracleWeights(cfg, 2)
	rng := rand.New(rand.NewPCG(2, 9))
	b := Batch{Seqs: contractSeqs(rng, cfg.Vocab)}
	dlp, dH := randomUpstream(rng, b)
	run := func(extra int) ([]float64, []float32) {
		tr := newCPUTrainer(cfg, append([]float32(nil), w...), 2, 4, nil)
		if extra > 0 { // a longer batch's workspace, of the same size, first
			if _, err := tr.workspace(len(b.Seqs), paddedLen(cfg, b.Seqs)+extra); err != nil {
				t.Fatal(err)
			}
		}
		n := len(b.Seqs) * b.width()
		lp, ent := make([]float64, n), make([]float64, n)
		tr.ZeroGrad()
		if err := tr.Forward(b, 0.9, lp, ent); err != nil {
			t.Fatal(err)
		}
		if len(tr.ws) != 1 {
			t.Fatalf("extra %d: %d workspaces, want the first reused", extra, len(tr.ws))
		}
		tr.Backward(dlp, dH)
		return append(lp, ent...), tr.grad.flat
	}
	out, grad := run(0)
	for _, extra := range []int{8, 24} {
		o, g := run(extra)
		if !reflect.DeepEqual(o, out) || !reflect.DeepEqual(g, grad) {
			t.Errorf("%d more rows: outputs or gradients differ from the batch's own workspace's", extra)
		}
	}
}
