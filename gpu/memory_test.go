package gpu

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/safetensors"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

func TestValidateUpperBounds(t *testing.T) {
	tiny, _ := Preset("tiny")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"context", func(c *Config) { c.Context = 100000000000 }, "context = 100000000000: must be at most 131072"},
		{"hidden", func(c *Config) { c.Hidden = 100000000 }, "hidden = 100000000: must be at most 1048576"},
		{"layers", func(c *Config) { c.Layers = 100000000 }, "layers = 100000000: must be at most 1024"},
		{"vocab", func(c *Config) { c.Vocab = 2000000000 }, "vocab = 2000000000: must be at most 4194304"},
		{"mlp", func(c *Config) { c.MLP = math.MaxInt }, "mlp = 9223372036854775807: must be at most 1048576"},
		{"params", func(c *Config) { c.Hidden, c.MLP, c.Layers = 1<<20, 1<<20, 1024 }, "exceed the limit of 274877906944"},
	} {
		c := tiny
		tc.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want ErrBadConfig containing %q", tc.name, err, tc.want)
		}
	}
	c := tiny
	c.Context, c.Layers = MaxContext, MaxLayers
	if err := c.Validate(); err != nil {
		t.Errorf("context %d, %d layers: %v, want valid", MaxContext, MaxLayers, err)
	}
}

func TestCheckMemory(t *testing.T) {
	err := checkMemory("training", 80e9, 23_100_000_000, true)
	want := "gpu: not enough memory: training needs 80.0 GB; this machine has 23.1 GB available"
	if !errors.Is(err, ErrMemory) || err.Error() != want {
		t.Errorf("checkMemory = %v, want %q", err, want)
	}
	if err := checkMemory("training", 80e9, 0, false); err != nil {
		t.Errorf("unknown available memory: %v, want nil", err)
	}
	if err := checkMemory("training", 23e9, 23e9, true); err != nil {
		t.Errorf("need = available: %v, want nil", err)
	}
	if err := CheckMemory("anything", memCheckMin-1); err != nil {
		t.Errorf("small estimate: %v, want nil", err)
	}
	if err := CheckMemory("the universe", math.MaxInt64); err != nil && !strings.Contains(err.Error(), "the universe needs more than") {
		t.Errorf("CheckMemory(MaxInt64) = %v", err)
	}
	for _, tc := range []struct {
		text string
		want int64
		ok   bool
	}{
		{"MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   22558708 kB\n", 22558708 * 1024, true},
		{"MemTotal: 1 kB\n", 0, false},
		{"MemAvailable: x kB\n", 0, false},
		{"MemAvailable: 99999999999999999 kB\n", 0, false},
	} {
		got, ok := parseMemAvailable(bufio.NewScanner(strings.NewReader(tc.text)))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseMemAvailable(%q) = %d, %t, want %d, %t", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEstimatesSaturate(t *testing.T) {
	c := Config{Vocab: MaxVocab, Hidden: MaxDim, Layers: MaxLayers, Heads: 1, KVHeads: 1, MLP: MaxDim, Context: MaxContext}
	for name, got := range map[string]int64{
		"LearnerBytes": c.LearnerBytes(math.MaxInt, math.MaxInt), "SampleBytes": c.SampleBytes(math.MaxInt, math.MaxInt, 10, 10),
		"ScoreBytes": c.ScoreBytes(math.MaxInt, math.MaxInt), "WeightBytes": c.WeightBytes(),
	} {
		if got <= 0 {
			t.Errorf("%s = %d, want a positive (saturated) estimate", name, got)
		}
	}
	if got := c.LearnerBytes(math.MaxInt, math.MaxInt); got != math.MaxInt64 {
		t.Errorf("LearnerBytes(MaxInt, MaxInt) = %d, want MaxInt64", got)
	}
}

// heapGrowth returns the live heap bytes that f leaves allocated (f
// keeps them reachable through its result).
func heapGrowth(f func() any) (int64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), keep
}

// within20 reports whether the estimate is within 20% of the measurement.
func within20(estimate, measured int64) bool {
	return math.Abs(float64(estimate-measured)) <= 0.2*float64(measured)
}

// bigVocab is a small model with Qwen3's vocabulary (151,936 tokens),
// whose memory is mostly lm_head, the embeddings and, without the tail's
// blocks, logits per row and vocabulary token.
var bigVocab = Config{Vocab: 151936, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, MLP: 64, Context: 128, RopeTheta: 10000, NormEps: 1e-6}

// memoryArchs are a config and its Qwen2 and Qwen3 variants (Qwen3's
// head width twice hidden/heads, as Qwen3's own), for the allocation
// tests.
func memoryArchs(c Config) []Config {
	q2, q3 := c, c
	q2.Arch = ArchQwen2
	q3.Arch, q3.HeadWidth = ArchQwen3, 2*c.Hidden/c.Heads
	return []Config{c, q2, q3}
}

// estimateCase is a model of the allocation tests and its batch: b
// sequences of seqLen tokens.
type estimateCase struct {
	cfg       Config
	b, seqLen int
}

// estimateCases are the presets' vocabulary in each architecture, and a
// large one (a smaller batch: each token's tail runs over the whole
// vocabulary).
func estimateCases() []estimateCase {
	var cs []estimateCase
	for _, c := range memoryArchs(Config{Vocab: 98, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, MLP: 192, Context: 64, RopeTheta: 10000, NormEps: 1e-6}) {
		cs = append(cs, estimateCase{c, 32, 64})
	}
	return append(cs, estimateCase{bigVocab, 12, 32})
}

// estimateSeqs are b sequences of seqLen tokens, half prompt, half
// completion.
func estimateSeqs(b, seqLen int) []Sequence {
	seqs := make([]Sequence, b)
	for i := range seqs {
		seqs[i] = Sequence{Prompt: make([]int, seqLen/2), Completion: make([]int, seqLen/2)}
		seqs[i].Prompt[0] = 1
	}
	return seqs
}

func TestLearnerBytesMatchesAllocation(t *testing.T) {
	checkEstimates(t, "LearnerBytes", "the learner holds after a step", Config.LearnerBytes, func(m *Model, seqs []Sequence) any {
		l, err := NewLearner(m, DefaultLearnerConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.SupervisedStep(seqs); err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestScoreBytesMatchesAllocation: scoring keeps its workspace in the
// model for the next call, and ScoreBytes is its size.
func TestScoreBytesMatchesAllocation(t *testing.T) {
	checkEstimates(t, "ScoreBytes", "scoring holds", Config.ScoreBytes, func(m *Model, seqs []Sequence) any {
		if _, err := m.Score(seqs, 1); err != nil {
			t.Fatal(err)
		}
		return nil
	})
}

// checkEstimates checks, for each estimate case, that est(cfg, b, seqLen)
// is within 20% of the heap alloc(model, its sequences) leaves (the model
// kept alive: its weights are not part of the estimates).
func checkEstimates(t *testing.T, name, holder string, est func(c Config, b, t int) int64, alloc func(*Model, []Sequence) any) {
	for _, tc := range estimateCases() {
		t.Run(fmt.Sprintf("%s vocab=%d", cmp.Or(tc.cfg.Arch, ArchLlama), tc.cfg.Vocab), func(t *testing.T) {
			m, _ := NewModel(tc.cfg, 1)
			seqs := estimateSeqs(tc.b, tc.seqLen)
			grew, keep := heapGrowth(func() any { return alloc(m, seqs) })
			runtime.KeepAlive(keep)
			runtime.KeepAlive(m)
			e := est(tc.cfg, tc.b, tc.seqLen)
			t.Logf("%s %d, measured %d", name, e, grew)
			if !within20(e, grew) {
				t.Errorf("%s(%d, %d) = %d, but %s %d bytes", name, tc.b, tc.seqLen, e, holder, grew)
			}
		})
	}
}

func TestSampleBytesMatchesAllocation(t *testing.T) {
	cfgs := memoryArchs(Config{Vocab: 98, Hidden: 64, Layers: 4, Heads: 4, KVHeads: 4, MLP: 128, Context: 128, RopeTheta: 10000, NormEps: 1e-6})
	for _, cfg := range append(cfgs, bigVocab) {
		t.Run(fmt.Sprintf("%s vocab=%d", cmp.Or(cfg.Arch, ArchLlama), cfg.Vocab), func(t *testing.T) { checkSampleBytes(t, cfg) })
	}
}

func checkSampleBytes(t *testing.T, cfg Config) {
	m, _ := NewModel(cfg, 1)
	const prompts, n, promptLen = 16, 4, 8
	newTokens := 120
	if cfg.Vocab > 1000 {
		newTokens = 8 // each token's softmax runs over the whole vocabulary
	}
	ps := make([][]int, prompts)
	for i := range ps {
		ps[i] = []int{1, 5, 6, 7, 8, 9, 10, 11}
	}
	grew, keep := heapGrowth(func() any {
		out, err := m.Sample(ps, n, SampleOptions{Temperature: 1, MaxNewTokens: newTokens, Seeds: PromptSeeds(1, len(ps))})
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
	runtime.KeepAlive(keep)
	runtime.KeepAlive(m)
	t.Logf("SampleBytes %d, measured %d", cfg.SampleBytes(prompts, n, promptLen, newTokens), grew)
	if est := cfg.SampleBytes(prompts, n, promptLen, newTokens); !within20(est, grew) {
		t.Errorf("SampleBytes = %d, but sampling holds %d bytes (cache and outputs)", est, grew)
	}
}

func TestLoadRefusesExtraTensorsAndHugeConfigs(t *testing.T) {
	tiny, _ := Preset("tiny")
	save := func(cfg Config) string {
		m, _ := NewModel(cfg, 3)
		dir := t.TempDir()
		if err := SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	editConfig := func(dir, key string, val any) {
		path := filepath.Join(dir, "config.json")
		b, _ := os.ReadFile(path)
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		raw[key] = val
		b, _ = json.Marshal(raw)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addHead := func(scale float64) func(dir string) {
		return func(dir string) {
			rewrite(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for _, x := range ts {
					if x.Name == "model.embed_tokens.weight" {
						v := append([]float64(nil), x.F64...)
						for i := range v {
							v[i] *= scale
						}
						return append(ts, safetensors.Tensor{Name: "lm_head.weight", Shape: x.Shape, F64: v})
					}
				}
				return ts
			})
		}
	}
	tied := tiny
	tied.TieEmbeddings = true
	for _, tc := range []struct {
		name string
		cfg  Config
		edit func(dir string)
		want string // "" loads
	}{
		{"fewer layers in config", tiny, func(dir string) { editConfig(dir, "num_hidden_layers", 1) },
			`tensor "model.layers.1.input_layernorm.weight" in model.safetensors is not described by config.json (1 layers`},
		{"tied config, untied file", tiny, func(dir string) { editConfig(dir, "tie_word_embeddings", true) },
			`tensor "lm_head.weight" in model.safetensors is not described`},
		{"tied with equal lm_head", tied, addHead(1), ""},
		{"tied with other lm_head", tied, addHead(2), `tensor "lm_head.weight"`},
		{"huge context", tiny, func(dir string) { editConfig(dir, "max_position_embeddings", 100000000000) },
			"max_position_embeddings = 100000000000: must be at most 131072"},
		{"huge vocab", tiny, func(dir string) { editConfig(dir, "vocab_size", 2000000000) },
			"vocab_size = 2000000000: must be at most 4194304"},
	} {
		dir := save(tc.cfg)
		tc.edit(dir)
		_, err := LoadModel(dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it to load", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0):
			t.Errorf("%s: LoadModel = %v, want one line containing %q", tc.name, err, tc.want)
		}
	}
}

func TestBenchRefusesBatchTooLargeForMemory(t *testing.T) {
	if _, ok := AvailableMemory(); !ok {
		t.Skip("no /proc/meminfo")
	}
	_, err := Bench("tiny", BenchOptions{Batch: 100_000_000})
	if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "the benchmark (batch 100000000) needs") {
		t.Errorf("Bench(batch 1e8) = %v, want ErrMemory naming the batch", err)
	}
}

// packedBytes is what pack allocates: a learner's panels both ways, a
// model's one way.
func TestPackedBytesMatchesAllocation(t *testing.T) {
	if !packable(Config{Vocab: 98, Hidden: 128, Layers: 1, Heads: 4, KVHeads: 4, MLP: 384, Context: 64}) {
		t.Skip("no packed kernel on this build")
	}
	cfg, _ := Preset("base")
	for _, backward := range []bool{false, true} {
		n := newNet(cfg, make([]float32, cfg.NumParams()), 1)
		grew, _ := heapGrowth(func() any { n.pack(backward); return n })
		nt, nn := packedBytes(cfg)
		if !backward {
			nn = 0
		}
		if est := int64(nt + nn); math.Abs(float64(est-grew)) > 0.02*float64(grew) {
			t.Errorf("backward %v: packedBytes %d, pack allocated %d", backward, est, grew)
		}
	}
}
