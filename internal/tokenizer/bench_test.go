package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHFEncode encodes the reference corpus (2000 generated lines,
// 121 kB) with the real tokenizer files cached by
// TestLongReferenceTokenizers (skipped until that test has installed
// them): cold, with the word cache emptied before each pass (every text
// new), and warm, the corpus encoded once before the timing (prompts a run
// has seen before); b.SetBytes makes -bench report MB/s.
func BenchmarkHFEncode(b *testing.B) {
	for _, name := range []string{"llama2", "llama3", "qwen3"} {
		for _, warm := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/warm=%t", name, warm), func(b *testing.B) {
				benchEncode(b, cachedTokenizer(b, name), warm)
			})
		}
	}
}

func benchEncode(b *testing.B, tok *HF, warm bool) {
	corpus := referenceCorpus(2000)
	n := 0
	for _, s := range corpus {
		n += len(s)
	}
	b.SetBytes(int64(n))
	encodeAll := func() int {
		if !warm {
			tok.model.cache.Clear()
			tok.model.size.Store(0)
		}
		tokens := 0
		for _, s := range corpus {
			ids, err := tok.Encode(s)
			if err != nil {
				b.Fatal(err)
			}
			tokens += len(ids)
		}
		return tokens
	}
	tokens := encodeAll()
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		encodeAll()
	}
	cpu := reportCPU(b, c0, n)
	b.ReportMetric(float64(tokens)/cpu, "tokens/cpu-s")
}

// BenchmarkHFDecode decodes the encoded reference corpus.
func BenchmarkHFDecode(b *testing.B) {
	tok := cachedTokenizer(b, "llama3")
	var ids [][]int
	n := 0
	for _, s := range referenceCorpus(2000) {
		e, _ := tok.Encode(s)
		ids = append(ids, e)
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		for _, e := range ids {
			tok.Decode(e)
		}
	}
	reportCPU(b, c0, n)
}

// cpuTime is the process's user+system CPU time, steadier than wall time
// on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU seconds per op and MB of text per CPU second,
// and returns the CPU seconds per op.
func reportCPU(b *testing.B, c0 time.Duration, bytes int) float64 {
	cpu := (cpuTime() - c0).Seconds() / float64(b.N)
	b.ReportMetric(cpu, "cpu-s/op")
	b.ReportMetric(float64(bytes)/1e6/cpu, "MB/cpu-s")
	return cpu
}

// cachedTokenizer loads one of the reference files from .tools.
func cachedTokenizer(b *testing.B, name string) *HF {
	b.Helper()
	wd, _ := os.Getwd()
	dir := filepath.Join(wd, "..", "..", ".tools", "npm-tokenizers", "node_modules", referenceFiles[name])
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		b.Skipf("%s: run the long reference test first (go test -run TestLongReferenceTokenizers ./internal/tokenizer)", name)
	}
	tok, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	return tok.(*HF)
}
