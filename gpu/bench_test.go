package gpu

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared machine it
// says more about the work done than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f once to allocate its workspaces (outside the timing), then
// b.N times, and reports CPU seconds per op next to ns/op.
func loop(b *testing.B, f func() error) {
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

var benchPresets = []string{"tiny", "small", "base"}

func benchWork(b *testing.B, preset string) (*benchWorkload, BenchOptions) {
	o := BenchOptions{Seed: 1}.withDefaults()
	w, err := newBenchWorkload(preset, o)
	if err != nil {
		b.Fatal(err)
	}
	return w, o
}

func BenchmarkLearnerStep(b *testing.B) {
	for _, p := range benchPresets {
		b.Run("preset="+p, func(b *testing.B) {
			w, o := benchWork(b, p)
			cfg := w.model.Config()
			loop(b, w.learnerStep)
			sec := b.Elapsed().Seconds() / float64(b.N)
			tokens := float64(o.Batch * (o.PromptLen + o.NewTokens))
			b.ReportMetric(tokens/sec, "tok/s")
			b.ReportMetric(3*cfg.FlopsPerToken(o.PromptLen+o.NewTokens)*tokens/sec/1e9, "GFLOP/s")
		})
	}
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

func BenchmarkScore(b *testing.B) {
	for _, p := range benchPresets {
		b.Run("preset="+p, func(b *testing.B) {
			w, o := benchWork(b, p)
			cfg := w.model.Config()
			loop(b, w.score)
			sec := b.Elapsed().Seconds() / float64(b.N)
			tokens := float64(o.Batch * (o.PromptLen + o.NewTokens))
			b.ReportMetric(tokens/sec, "tok/s")
			b.ReportMetric(cfg.FlopsPerToken(o.PromptLen+o.NewTokens)*tokens/sec/1e9, "GFLOP/s")
		})
	}
}
