//go:build cuda || cudaemu

package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
)

// TestCUDABF16CopiesKeepBits: with bf16 products the kernels that write a
// product's activation operand write its bf16 copy beside it
// (cudaPass.out) instead of a conversion after them, and the products
// must read the same bits. A bf16 engine's log-probs, entropies and every
// gradient, and its snapshot's scores and greedy samples, equal bit for
// bit those of a net that converts every operand (cudaNet.convert16, the
// path before), on
// Llama, grouped-query, Qwen2 and Qwen3 configs, with the lm_head in one
// block and in several, for a batch with prompts (the last block on the
// need rows only) and one of one-token prompts (every row a need row); and
// the passes convert only what no kernel writes in bf16.
func TestCUDABF16CopiesKeepBits(t *testing.T) {
	rt := &conversionCounter{Runtime: cudatest.Open(t)}
	dev := newCUDADevice(rt, cuda.MathBF16, false)
	tiny, _ := Preset("tiny")
	gqa := Config{Vocab: 98, Hidden: 192, Layers: 2, Heads: 6, KVHeads: 2, MLP: 96, Context: 64, RopeTheta: 10000, NormEps: 1e-6}
	rng := rand.New(rand.NewPCG(23, 1))
	for _, cfg := range []Config{tiny, gqa, contractArch(ArchQwen2), contractArch(ArchQwen3)} {
		_, w := oracleWeights(cfg, 23)
		ids := func(n int) []int { return randomIDs(rng, n, cfg.Vocab) }
		batches := []Batch{{Seqs: contractSeqs(rng, cfg.Vocab)},
			{Seqs: []Sequence{{Prompt: []int{1}, Completion: ids(5)}, {Prompt: []int{1}, Completion: ids(2)}}}}
		for i, b := range batches {
			for _, blocks := range []bool{false, true} {
				name := fmt.Sprintf("%s, batch %d, lm_head in blocks %v", contractName(cfg), i, blocks)
				want, _ := bf16Outputs(t, dev, cfg, w, b, blocks, true)
				got, n := bf16Outputs(t, dev, cfg, w, b, blocks, false)
				for _, what := range []string{"log-probs", "entropies", "gradients", "scored log-probs", "scored entropies", "sampled"} {
					if i := firstBitDiff(got[what], want[what]); i >= 0 {
						t.Errorf("%s: %s differ from index %d of %d (%d converting every operand)", name, what, i, len(got[what]), len(want[what]))
					}
				}
				if want := bf16Conversions(cfg, b, blocks); n != want {
					t.Errorf("%s: forward and backward converted %v operands, want %v", name, n, want)
				}
			}
		}
	}
}

// bf16Outputs runs a forward and a backward pass of b (random upstream
// gradients) on a new engine of dev over weights w, then a Score and a
// greedy Sample of its snapshot, with the lm_head in blocks of 3 need
// rows or in one, and every operand converted or not; it returns the
// outputs and gradients by name (the samples' tokens, log-probs and
// entropies as "sampled"), and the f32_to_bf16_kernel launches of the forward and the
// backward pass.
func bf16Outputs(t *testing.T, dev *cudaDevice, cfg Config, w []float32, b Batch, blocks, convert bool) (map[string][]float32, [2]int) {
	t.Helper()
	eng, err := newCUDAEngine(dev, cfg, w, DefaultLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if blocks {
		eng.net.headBudget = 3 * cfg.Vocab
	}
	eng.net.convert16 = convert
	n, rt := len(b.Seqs)*b.width(), dev.rt.(*conversionCounter)
	lp, ent, slp, sent := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	dlp, dH := randomUpstream(rand.New(rand.NewPCG(23, 2)), b)
	var count [2]int
	eng.ZeroGrad()
	before := rt.n
	err = eng.Forward(b, 0.7, lp, ent)
	count[0], before = rt.n-before, rt.n
	err = errors.Join(err, eng.Backward(dlp, dH))
	count[1] = rt.n - before
	g := make([]float32, cfg.NumParams())
	snap, errSnap := eng.Snapshot()
	if err := errors.Join(err, errSnap, eng.ReadGrads(g, 0)); err != nil {
		t.Fatal(err)
	}
	m := snap.(*cudaModel)
	m.net.headBudget, m.net.convert16 = eng.net.headBudget, convert
	if err := m.Score(b, 0.7, slp, sent); err != nil {
		t.Fatal(err)
	}
	samples, err := m.Sample(samplePrompts, 2, SampleOptions{Greedy: true, MaxNewTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	var sampled []float64
	for _, s := range samples {
		for i, tok := range s.Tokens {
			sampled = append(sampled, float64(tok), s.LogProbs[i], s.Entropies[i])
		}
	}
	return map[string][]float32{"log-probs": to32(lp), "entropies": to32(ent), "gradients": g,
		"scored log-probs": to32(slp), "scored entropies": to32(sent), "sampled": to32(sampled)}, count
}

// bf16Conversions is what a forward and a backward pass of b convert,
// with the kernels writing the bf16 copies of their outputs and the
// forward's kept for the backward pass: per layer attention's output
// forward and dqkv backward; per lm_head block the final norm's output,
// forward and backward (twice backward, when the backward recomputes the
// block's logits).
func bf16Conversions(cfg Config, b Batch, blocks bool) [2]int {
	K := 0
	for _, s := range b.Seqs {
		K += len(s.Completion)
	}
	head := 1
	if blocks {
		head = (K + 2) / 3
	}
	recompute := 0
	if head > 1 {
		recompute = head
	}
	return [2]int{cfg.Layers + head, cfg.Layers + head + recompute}
}

// firstBitDiff is the first index where got and want differ in their
// bits (one ending counts), or -1.
func firstBitDiff(got, want []float32) int {
	for i := range min(len(got), len(want)) {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	return -1
}

// conversionCounter counts the f32_to_bf16_kernel launches made through
// it.
type conversionCounter struct {
	cuda.Runtime
	n int
}

func (r *conversionCounter) Launch(name string, grid, block cuda.Dim3, shared int, args ...any) error {
	if name == "f32_to_bf16_kernel" {
		r.n++
	}
	return r.Runtime.Launch(name, grid, block, shared, args...)
}
