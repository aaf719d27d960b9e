package tasks

import (
	"math/rand/v2"
	"testing"
	"time"
)

var (
	sinkVerdict Verdict
	sinkFloats  []float64
	sinkString  string
)

// BenchmarkVerify times one Verify of a generated problem's correct
// solution, per task with default options.
func BenchmarkVerify(b *testing.B) {
	for _, name := range Names() {
		b.Run("task="+name, func(b *testing.B) {
			task := mustTask(b, name, Options{})
			rng := rand.New(rand.NewPCG(1, 1))
			ps := Batch(task, rng, 256)
			sols := make([]string, len(ps))
			for i, p := range ps {
				sols[i], _ = task.Solution(p, rng)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i % len(ps)
				sinkVerdict = task.Verify(sols[k], ps[k].Answer)
			}
		})
	}
}

// BenchmarkReward times the accuracy reward over a batch of 128
// completions (G=8 × 16 prompts), including the timeout machinery.
func BenchmarkReward(b *testing.B) {
	for _, name := range Names() {
		b.Run("task="+name, func(b *testing.B) {
			task := mustTask(b, name, Options{})
			rng := rand.New(rand.NewPCG(1, 1))
			ps := Batch(task, rng, 128)
			comps, answers := make([]string, len(ps)), make([]string, len(ps))
			for i, p := range ps {
				comps[i], _ = task.Solution(p, rng)
				answers[i] = p.Answer
			}
			fn, _ := Reward("accuracy", task, time.Second)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sinkFloats = fn(comps, answers)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(comps)), "ns/completion")
		})
	}
}

// BenchmarkSolution times the countdown solver (warm-start data).
func BenchmarkSolution(b *testing.B) {
	for _, n := range []int{3, 4} {
		b.Run("countdown/numbers="+itoa(int64(n)), func(b *testing.B) {
			task := mustTask(b, "countdown", Options{Numbers: n})
			rng := rand.New(rand.NewPCG(1, 1))
			ps := Batch(task, rng, 256)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sinkString, _ = task.Solution(ps[i%len(ps)], rng)
			}
		})
	}
}
