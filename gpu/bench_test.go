package gpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/gpu/internal/panel"
	"github.com/mgrpo/mgrpo/gpu/loss"
)

// cpuTime is the process's user+system CPU time: on a shared machine it
// says more about the work done than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f once to allocate its workspaces (outside the timing and
// the allocation count), then b.N times, and reports CPU seconds per op
// next to ns/op, and the bytes and allocations of each op.
func loop(b *testing.B, f func() error) {
	b.ReportAllocs()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	c0 := cpuTime()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
}

// Benchmarks of DESIGN §6 (B = 128 sequences × 32 tokens; sampling 128 ×
// 16 new tokens). Run with
//
//	go test -run '^$' -bench . ./gpu/
//	CGO_LDFLAGS="-L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas" go test -tags openblas -run '^$' -bench . ./gpu/

var benchPresets = []string{"tiny", "small", "base", "qwen2-base", "qwen3-base"}

func benchWork(b *testing.B, preset string) (*benchWorkload, BenchOptions) {
	o := BenchOptions{Seed: 1}.withDefaults()
	w, err := newBenchWorkload(preset, o)
	if err != nil {
		b.Fatal(err)
	}
	return w, o
}

// largeVocab is the `small` preset with Qwen3's vocabulary of 151,936
// tokens, where lm_head and the log-softmax over it are most of the work;
// its benchmarks run 16 sequences of 16 + 16 tokens.
func largeVocab(b *testing.B) (*benchWorkload, BenchOptions) {
	cfg, _ := Preset("small")
	cfg.Vocab = 151936
	o := BenchOptions{Seed: 1, Batch: 16}.withDefaults()
	w, err := newConfigWorkload(cfg, o)
	if err != nil {
		b.Fatal(err)
	}
	return w, o
}

// learnerLoop runs loop over learner steps of w on seqs and reports the
// mean time of the step's optimiser phase (clip, AdamW preview and step).
func learnerLoop(b *testing.B, w *benchWorkload, seqs []Sequence, lb loss.Batch) {
	var opt time.Duration
	loop(b, func() error {
		st, err := w.learner.Step(Batch{Seqs: seqs}, 1, func(lp, _ []float64) (loss.Result, error) { return loss.Policy(w.grpo, lb, lp) })
		opt += st.Optimizer
		return err
	})
	b.ReportMetric(opt.Seconds()*1e3/float64(b.N+1), "optimizer-ms/op")
}

// BenchmarkLearnerStep runs GRPO learner steps. B/op is what a step
// allocates once its workspaces exist; learner-MB is the learner's memory
// (Config.LearnerBytes: weights, gradients, AdamW moments and the step's
// workspace), the working set it is small against.
func BenchmarkLearnerStep(b *testing.B) { benchModels(b, learnerBench) }

// benchModels runs f on each preset's bench workload and on largeVocab's.
func benchModels(b *testing.B, f func(b *testing.B, w *benchWorkload, o BenchOptions)) {
	for _, p := range benchPresets {
		b.Run("preset="+p, func(b *testing.B) {
			w, o := benchWork(b, p)
			f(b, w, o)
		})
	}
	b.Run("vocab=151936", func(b *testing.B) {
		w, o := largeVocab(b)
		f(b, w, o)
	})
}

// learnerBench times learner steps of w on its bench batch.
func learnerBench(b *testing.B, w *benchWorkload, o BenchOptions) {
	cfg := w.model.Config()
	learnerLoop(b, w, w.seqs, w.lb)
	sec := b.Elapsed().Seconds() / float64(b.N)
	tokens := float64(o.Batch * (o.PromptLen + o.NewTokens))
	b.ReportMetric(tokens/sec, "tok/s")
	b.ReportMetric(3*cfg.FlopsPerToken(o.PromptLen+o.NewTokens)*tokens/sec/1e9, "GFLOP/s")
	b.ReportMetric(float64(cfg.LearnerBytes(o.Batch, paddedLen(cfg, w.seqs)))/1e6, "learner-MB")
}

func BenchmarkSample(b *testing.B) {
	for _, p := range benchPresets {
		b.Run("preset="+p, func(b *testing.B) {
			w, o := benchWork(b, p)
			loop(b, w.sampleBatch)
			b.ReportMetric(float64(o.Batch*o.NewTokens)/(b.Elapsed().Seconds()/float64(b.N)), "tok/s")
		})
	}
}

func BenchmarkScore(b *testing.B) { benchModels(b, scoreBench) }

// scoreBench times scoring w's bench batch.
func scoreBench(b *testing.B, w *benchWorkload, o BenchOptions) {
	cfg := w.model.Config()
	loop(b, w.score)
	sec := b.Elapsed().Seconds() / float64(b.N)
	tokens := float64(o.Batch * (o.PromptLen + o.NewTokens))
	b.ReportMetric(tokens/sec, "tok/s")
	b.ReportMetric(cfg.FlopsPerToken(o.PromptLen+o.NewTokens)*tokens/sec/1e9, "GFLOP/s")
}

// BenchmarkRagged is the `base` learner step and scoring on the bench
// batch with completions of 1–16 tokens (uniform, seeded) instead of all
// 16, as a run's batches are: what packing the batches saves.
func BenchmarkRagged(b *testing.B) {
	w, _ := benchWork(b, "base")
	rng := rand.New(rand.NewPCG(9, 9))
	seqs := make([]Sequence, len(w.seqs))
	for i, s := range w.seqs {
		seqs[i] = Sequence{Prompt: s.Prompt, Completion: s.Completion[:1+rng.IntN(len(s.Completion))]}
	}
	learnAndScore(b, w, seqs, rng)
}

// BenchmarkGrouped is BenchmarkRagged on a GRPO batch: the bench's first
// 16 prompts with 8 completions each: what sharing a group's prompt rows
// saves.
func BenchmarkGrouped(b *testing.B) {
	w, _ := benchWork(b, "base")
	rng := rand.New(rand.NewPCG(9, 9))
	seqs := make([]Sequence, len(w.seqs))
	for i, s := range w.seqs {
		seqs[i] = Sequence{Prompt: w.seqs[i/8].Prompt, Completion: s.Completion[:1+rng.IntN(len(s.Completion))]}
	}
	learnAndScore(b, w, seqs, rng)
}

// learnAndScore runs the learner step (with random advantages) and
// scoring on seqs as sub-benchmarks.
func learnAndScore(b *testing.B, w *benchWorkload, seqs []Sequence, rng *rand.Rand) {
	lb := Batch{Seqs: seqs}.LossBatch()
	lb.OldLogp, lb.RefLogp = make([]float64, len(lb.Mask)), make([]float64, len(lb.Mask))
	for range seqs {
		lb.Advantages = append(lb.Advantages, rng.NormFloat64())
	}
	b.Run("learner", func(b *testing.B) { learnerLoop(b, w, seqs, lb) })
	b.Run("score", func(b *testing.B) {
		loop(b, func() error { _, err := w.model.Score(seqs, 1); return err })
	})
}

// BenchmarkProducts runs, on one core, each weight product of a `base`
// learner step on one shard's rows (32 sequences × 32 tokens; the last
// block's on the 16 scored rows of each), next to a 1024³ product: the
// GFLOP/s the step's products reach when nothing else runs, which is the
// step's ceiling (docs/BENCHMARKS.md). Each product runs through BLAS
// (blas/…) and, where this CPU has the kernel, through the packed weights
// (packed/…), as cpuLinear runs them.
func BenchmarkProducts(b *testing.B) {
	cfg, _ := Preset("base")
	const rows = 32 * 32
	d, m, v := cfg.Hidden, cfg.MLP, cfg.Vocab
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%7) * 0.01
		}
		return x
	}
	for _, s := range []struct {
		name          string
		rows, in, out int
	}{
		{"qkv", rows, d, 3 * d}, {"o", rows, d, d}, {"gate_up", rows, d, 2 * m}, {"down", rows, m, d},
		{"last_o", rows / 2, d, d}, {"last_gate_up", rows / 2, d, 2 * m}, {"last_down", rows / 2, m, d}, {"lm_head", rows / 2, d, v},
	} {
		x, w, y, dw := fill(s.rows*s.in), fill(s.out*s.in), fill(s.rows*s.out), fill(s.out*s.in)
		flops := 2 * float64(s.rows*s.in*s.out)
		engines := []struct {
			name string
			mm   linear[float32]
		}{{"blas", cpuLinear[float32]{workers: 1}}}
		if panel.Available() {
			pk := &packedWeights{nt: map[*float32]*panel.Matrix{}, nn: map[*float32]*panel.Matrix{}}
			pk.add(w, panel.New(s.in, s.out), panel.New(s.out, s.in))
			pk.list[0].nt.SetT(w)
			pk.list[0].nn.Set(w)
			engines = append(engines, struct {
				name string
				mm   linear[float32]
			}{"packed", cpuLinear[float32]{1, pk}})
		}
		for _, e := range engines {
			for _, p := range []struct {
				kind string
				f    func()
			}{
				{"NT", func() { e.mm.NT(y, x, w, s.rows, s.in, s.out, false) }},
				{"NN", func() { e.mm.NN(x, y, w, s.rows, s.in, s.out, false) }},
				{"TNAdd", func() { e.mm.TNAdd(dw, y, x, s.rows, s.in, s.out) }},
			} {
				b.Run(e.name+"/"+s.name+"/"+p.kind, func(b *testing.B) {
					for b.Loop() {
						p.f()
					}
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
	const n = 1024
	x, y, z := fill(n*n), fill(n*n), fill(n*n)
	b.Run("sgemm_1024", func(b *testing.B) {
		for b.Loop() {
			gemm(false, true, n, n, n, 1, x, n, y, n, 0, z, n)
		}
		b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// BenchmarkTranspose times the sampler's transposition of the largest
// matrix of the smollm2-135m preset, its head ([49152, 576]), on one
// worker and on every core: what each new policy version costs a sampler
// without packed weights before its first token.
func BenchmarkTranspose(b *testing.B) {
	const rows, cols = 49152, 576
	w := make([]float32, rows*cols)
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				transpose(w, rows, cols, workers)
			}
		})
	}
}
