package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ErrMemory is returned (wrapped) when a model, learner, sampler or batch
// would need more memory than the machine has available.
var ErrMemory = errors.New("gpu: not enough memory")

// memCheckMin is the smallest estimate checked against /proc/meminfo:
// smaller allocations are never refused, so the many small models of the
// tests and the training loop do not read the file.
const memCheckMin = 256 << 20

// The estimates below are the CPU engine's (host memory): they mirror the
// allocations of newCPUModel, newCPUEngine, newActs and newDecoder. A
// device engine sizes its own buffers and checks them when it is made
// (docs/ENGINE.md). They are computed in float64, so that any dimensions
// (even ones Validate refuses) give a finite number, and converted with
// toBytes, which saturates at math.MaxInt64.

// WeightBytes is the memory of one copy of the float32 weights:
// NumParams × 4 bytes.
func (c Config) WeightBytes() int64 { return toBytes(4 * c.params()) }

// ModelBytes is the memory of a Model: its weights, their packed copy
// (when packed: packed.go) and the RoPE table.
func (c Config) ModelBytes() int64 { return toBytes(c.modelBytes()) }

func (c Config) modelBytes() float64 {
	nt, _ := packedBytes(c)
	return 4*c.params() + nt + 4*float64(c.Context)*float64(c.headDim())
}

// LearnerBytes is the memory a Learner needs to train batches of b
// sequences padded to t tokens: its copy of the weights (and their packed
// copies for both products, when packed), the gradients, AdamW's two
// moments (4 × WeightBytes), the RoPE table and the training workspace of
// that shape (every layer's activations, attention probabilities
// [b, heads, t, t] included, and one block of lm_head's logits: no
// activation is per row and vocabulary token). With
// LearnerConfig.MicroBatch, b is the micro-batch's size.
func (c Config) LearnerBytes(b, t int) int64 {
	workers := runtime.GOMAXPROCS(0)
	shards := learnerShards(c, workers, false)
	extra := 4 * float64(shards-1) * c.params() // the shards' gradients
	_, nn := packedBytes(c)                     // the x·wᵀ packing is in modelBytes
	return toBytes(c.modelBytes() + nn + 12*c.params() + extra + batchBytes(c, b, t, min(shardCount(b, workers), shards), workers, true))
}

// ScoreBytes is the memory of Model.Score's forward-only workspace for b
// sequences padded to t tokens (Score works in chunks of at most 128).
func (c Config) ScoreBytes(b, t int) int64 {
	b = min(b, scoreChunk)
	return toBytes(batchBytes(c, b, t, shardCount(b, runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0), false))
}

// SampleBytes is the memory Model.Sample needs to draw n completions of
// newTokens tokens for each of prompts prompts of promptLen tokens: the
// key/value cache of prompts·n sequences of promptLen + newTokens
// positions (at most the context), the activations of the prefill rows, a
// row of logits per sequence, the samplers' buffers, the returned tokens,
// log-probs and entropies, and (once per Model, unless its weights are
// packed) a transposed copy of the weights.
func (c Config) SampleBytes(prompts, n, promptLen, newTokens int) int64 {
	slots := float64(prompts) * float64(n)
	tmax := min(float64(promptLen)+float64(newTokens), float64(c.Context))
	rows := max(float64(prompts)*float64(promptLen), slots)
	var transposed float64
	if !packable(c) { // every matrix but the embeddings
		transposed = 4 * c.params()
		if !c.TieEmbeddings {
			transposed -= 4 * float64(c.Vocab) * float64(c.Hidden)
		}
	}
	return toBytes(transposed + sampleBytes(c, slots, tmax, rows, float64(newTokens), runtime.GOMAXPROCS(0)))
}

// sampleBytes is the decoder of slots sequences of tmax positions with
// rows rows per step (newDecoder), plus sampleNet's per-sequence state and
// outputs of up to newTokens tokens each.
func sampleBytes(c Config, slots, tmax, rows, newTokens float64, workers int) float64 {
	d, m, v, e := float64(c.Hidden), float64(c.MLP), float64(c.Vocab), float64(c.headDim())
	h, g, k := float64(c.Heads), float64(c.KVHeads), float64(workers)
	cache := 2 * float64(c.Layers) * slots * tmax * g * e
	perRow := 2*d + 1 + (h+2*g)*e + h*e + 4*m + 3 // x, xn, inv, qkv, att, gu, act, sig; tok, pos, slot
	if c.QKNorm() {
		perRow += h + g // 1/rms of each q and k head
	}
	// and a row of logits per sequence
	decoder := 4 * (cache + rows*perRow + slots*v + k*tmax)
	drawers := k * v * 24                                 // lp, p (float64) and cand (int)
	perSeq := 200 + 24*min(newTokens, float64(c.Context)) // Sample, limit, rng, rowOf; tokens, log-probs, entropies
	return decoder + drawers + slots*perSeq
}

// actsBytes is the size of newPart(c, b, t, workers, parts, train).
func actsBytes(c Config, b, t, workers, parts int, train bool) float64 {
	n, tf := float64(b)*float64(t), float64(t)
	d, m := float64(c.Hidden), float64(c.MLP)
	e := float64(c.headDim())
	qs, he := float64(c.Heads+2*c.KVHeads)*e, float64(c.Heads)*e
	layers, resid := 1.0, min(float64(c.Layers)+1, 2)
	if train {
		layers, resid = float64(c.Layers), float64(c.Layers)+1
	}
	perLayer := n*(3*d+2+qs+he+3*m) + float64(b)*float64(c.Heads)*tf*tf
	perLayer += archLayerFloats(c, n, train)
	sig := float64(max(workers, 1)) * m // forward-only: a scratch row per worker (sigLen)
	if train {
		sig = n * m
	}
	floats := layers*(perLayer+sig) + resid*n*d + n*(he+d+1)   // + attRows, xf, invf
	bytes := 4*floats + tailBytes(c, n, workers, parts) + 21*n // tokens, pos, targets, rows, slots (int32), need (bool)
	if train {
		scratch := n*(2*d+qs+he+3*m) + float64(max(workers, 1))*tf*tf + archScratchFloats(c, n, workers)
		bytes += 4*scratch + 16*n // + dlp, dH (float64)
	}
	return bytes
}

// archLayerFloats is what a layer of Qwen3 adds to a workspace of n rows
// (addArch): each q and k head's 1/rms and, to train, the heads before
// the norm.
func archLayerFloats(c Config, n float64, train bool) float64 {
	if !c.QKNorm() {
		return 0
	}
	heads := float64(c.Heads + c.KVHeads)
	if train {
		return n * heads * (1 + float64(c.headDim()))
	}
	return n * heads
}

// archScratchFloats is the backward scratch of the Qwen layers: Qwen3's
// head of gradient per worker, Qwen2's n ones.
func archScratchFloats(c Config, n float64, workers int) float64 {
	switch {
	case c.QKNorm():
		return float64(max(workers, 1) * c.headDim())
	case c.QKVBias():
		return n
	}
	return 0
}

// toBytes rounds x up to an int64, saturating at math.MaxInt64.
func toBytes(x float64) int64 {
	if !(x < math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(math.Ceil(x))
}

// AvailableMemory returns MemAvailable of /proc/meminfo in bytes, and
// false when it cannot be read (not Linux, or an old kernel).
func AvailableMemory() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseMemAvailable(bufio.NewScanner(f))
}

// parseMemAvailable finds the "MemAvailable: N kB" line.
func parseMemAvailable(sc *bufio.Scanner) (int64, bool) {
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// CheckMemory returns an error wrapping ErrMemory, one line naming what
// needs the memory, when need bytes exceed the memory available to this
// process: the machine's, and the heap the process holds but does not use
// (ReadMemory; after a garbage collection when the first reading falls
// short). Estimates under 256 MiB, and machines whose available memory
// cannot be read, always pass.
func CheckMemory(what string, need int64) error {
	if need < memCheckMin {
		return nil
	}
	return checkMemoryWith(what, need, ReadMemory, collectGarbage)
}

func checkMemory(what string, need, avail int64, known bool) error {
	if !known || need <= avail {
		return nil
	}
	return fmt.Errorf("%w: %s needs %s; this machine has %s available", ErrMemory, what, formatBytes(float64(need)), formatBytes(float64(avail)))
}

// formatBytes writes a byte count in GB (10^9) or, below 0.1 GB, MB.
func formatBytes(b float64) string {
	switch {
	case b >= math.MaxInt64:
		return "more than 9.2e+09 GB"
	case b >= 1e8:
		return fmt.Sprintf("%.1f GB", b/1e9)
	}
	return fmt.Sprintf("%.1f MB", b/1e6)
}
