package gpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"
)

// BenchOptions sets the workload of Bench. Zero fields take the defaults
// of DESIGN §6: 128 sequences of 32 tokens (16 prompt + 16 completion) for
// the learner and scoring, 128 prompts of 16 tokens × 16 new tokens for
// sampling, and at least 1 s (or 3 repeats) per measurement.
type BenchOptions struct {
	Batch     int           // sequences per batch
	PromptLen int           // prompt tokens per sequence (BOS included)
	NewTokens int           // completion tokens (learner/score) and new tokens (sample)
	MinTime   time.Duration // measure each figure for at least this long
	Seed      uint64
	// Device runs the learner step's weight products (nil: the CPU);
	// sampling and scoring run on the CPU, as in training.
	Device Device
}

// BenchResult holds the measured figures (JSON for `mgrpo-node bench`).
type BenchResult struct {
	Preset    string `json:"preset"`
	BLAS      string `json:"blas"`
	Device    string `json:"device"`  // the learner's device (Device.Info)
	Threads   int    `json:"threads"` // GOMAXPROCS
	Params    int    `json:"params"`
	Batch     int    `json:"batch"`
	PromptLen int    `json:"prompt_len"`
	NewTokens int    `json:"new_tokens"`
	SeqTokens int    `json:"seq_tokens"` // batch × (prompt + new): tokens per learner/score batch

	LearnerStepSec float64 `json:"learner_step_s"`   // forward + backward + clip + AdamW
	LearnerGFLOPS  float64 `json:"learner_gflops"`   // 3 × forward FLOPs / step time
	SampleTokPerS  float64 `json:"sample_tok_per_s"` // new tokens / s (prefill included in the time)
	ScoreTokPerS   float64 `json:"score_tok_per_s"`  // scored positions / s (forward only)
	ScoreGFLOPS    float64 `json:"score_gflops"`
}

func (o BenchOptions) withDefaults() BenchOptions {
	if o.Batch == 0 {
		o.Batch = 128
	}
	if o.PromptLen == 0 {
		o.PromptLen = 16
	}
	if o.NewTokens == 0 {
		o.NewTokens = 16
	}
	if o.MinTime == 0 {
		o.MinTime = time.Second
	}
	return o
}

// benchWorkload is the model and batches one benchmark runs on.
type benchWorkload struct {
	model   *Model
	learner *Learner
	seqs    []Sequence
	prompts [][]int
	sample  SampleOptions
}

func newBenchWorkload(preset string, o BenchOptions) (*benchWorkload, error) {
	cfg, err := Preset(preset)
	if err != nil {
		return nil, err
	}
	if o.PromptLen < 1 || o.NewTokens < 1 || o.Batch < 1 || o.PromptLen+o.NewTokens > cfg.Context {
		return nil, fmt.Errorf("%w: bench batch %d, prompt %d + new %d tokens (context %d)", ErrBadInput, o.Batch, o.PromptLen, o.NewTokens, cfg.Context)
	}
	if err := CheckMemory(fmt.Sprintf("the benchmark (batch %d)", o.Batch), benchBytes(cfg, o)); err != nil {
		return nil, err
	}
	m, err := NewModel(cfg, o.Seed)
	if err != nil {
		return nil, err
	}
	lc := DefaultLearnerConfig()
	lc.Device = o.Device
	l, err := NewLearner(m, lc)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	w := &benchWorkload{model: m, learner: l,
		sample: SampleOptions{Temperature: 1, MaxNewTokens: o.NewTokens, Seeds: PromptSeeds(o.Seed, o.Batch)}}
	for i := 0; i < o.Batch; i++ {
		p, c := []int{1}, make([]int, o.NewTokens)
		for len(p) < o.PromptLen {
			p = append(p, 3+rng.IntN(cfg.Vocab-3))
		}
		for j := range c {
			c[j] = 3 + rng.IntN(cfg.Vocab-3)
		}
		w.prompts = append(w.prompts, p)
		w.seqs = append(w.seqs, Sequence{Prompt: p, Completion: c})
	}
	return w, nil
}

// benchBytes estimates the memory of a benchmark: the model, the learner
// with its batch workspace, the sampler, the scoring workspace and the
// batch's token slices.
func benchBytes(cfg Config, o BenchOptions) int64 {
	seqLen := o.PromptLen + o.NewTokens
	t := min((seqLen+7)/8*8, cfg.Context)
	tokens := 16 * float64(o.Batch) * float64(seqLen)
	sum := float64(cfg.ModelBytes()) + float64(cfg.LearnerBytes(o.Batch, t)) + float64(cfg.ScoreBytes(o.Batch, t)) +
		float64(cfg.SampleBytes(o.Batch, 1, o.PromptLen, o.NewTokens)) + tokens
	return toBytes(sum)
}

func (w *benchWorkload) learnerStep() error {
	_, err := w.learner.SupervisedStep(w.seqs)
	return err
}

func (w *benchWorkload) sampleBatch() error {
	_, err := w.model.Sample(w.prompts, 1, w.sample)
	return err
}

func (w *benchWorkload) score() error {
	_, err := w.model.Score(w.seqs, 1)
	return err
}

// timeIt runs f once to warm up, then repeatedly for at least minTime and
// 3 runs, and returns the mean seconds per run.
func timeIt(minTime time.Duration, f func() error) (float64, error) {
	if err := f(); err != nil {
		return 0, err
	}
	start, n := time.Now(), 0
	for n < 3 || time.Since(start) < minTime {
		if err := f(); err != nil {
			return 0, err
		}
		n++
	}
	return time.Since(start).Seconds() / float64(n), nil
}

// Bench measures the learner step, sampling and scoring of a preset on this
// machine (DESIGN §6); `mgrpo-node bench --preset P` prints the result.
func Bench(preset string, opt BenchOptions) (BenchResult, error) {
	o := opt.withDefaults()
	if o.Device == nil {
		o.Device = CPU{}
	}
	w, err := newBenchWorkload(preset, o)
	if err != nil {
		return BenchResult{}, fmt.Errorf("bench %s: %w", preset, err)
	}
	cfg := w.model.Config()
	seqLen := o.PromptLen + o.NewTokens
	r := BenchResult{Preset: preset, BLAS: BLASInfo(), Device: o.Device.Info(), Threads: runtime.GOMAXPROCS(0), Params: cfg.NumParams(),
		Batch: o.Batch, PromptLen: o.PromptLen, NewTokens: o.NewTokens, SeqTokens: o.Batch * seqLen}
	flops := cfg.FlopsPerToken(seqLen) * float64(r.SeqTokens)
	if r.LearnerStepSec, err = timeIt(o.MinTime, w.learnerStep); err != nil {
		return r, fmt.Errorf("bench %s: learner: %w", preset, err)
	}
	r.LearnerGFLOPS = 3 * flops / r.LearnerStepSec / 1e9
	sec, err := timeIt(o.MinTime, w.sampleBatch)
	if err != nil {
		return r, fmt.Errorf("bench %s: sample: %w", preset, err)
	}
	r.SampleTokPerS = float64(o.Batch*o.NewTokens) / sec
	if sec, err = timeIt(o.MinTime, w.score); err != nil {
		return r, fmt.Errorf("bench %s: score: %w", preset, err)
	}
	r.ScoreTokPerS, r.ScoreGFLOPS = float64(r.SeqTokens)/sec, flops/sec/1e9
	return r, nil
}
