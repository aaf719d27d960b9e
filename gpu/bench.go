package gpu

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mgrpo/mgrpo/gpu/loss"
)

// BenchOptions sets the workload of Bench. Zero fields take the defaults
// of DESIGN §6: 128 sequences of 32 tokens (16 prompt + 16 completion) for
// the learner and scoring, 128 prompts of 16 tokens × 16 new tokens for
// sampling, and each figure the median of at least 3 runs and 1 s.
type BenchOptions struct {
	Batch     int           // sequences per batch
	PromptLen int           // prompt tokens per sequence (BOS included)
	NewTokens int           // completion tokens (learner/score) and new tokens (sample)
	MinTime   time.Duration // measure each figure for at least this long
	Reps      int           // and at least this many runs (after one warm-up run)
	Seed      uint64
	// Device makes the learner's engine (nil: the CPU). On another device
	// than the CPU, sampling and scoring run on the learner's snapshot (on
	// that device) instead of a CPU model.
	Device Device
	// SkipSample leaves sampling out (SampleTokPerS 0): long completions
	// of the large presets take long.
	SkipSample bool
}

// BenchResult holds the measured figures (JSON for `mgrpo-node bench`).
type BenchResult struct {
	Preset    string `json:"preset"`
	CPU       string `json:"cpu"` // the processor's model name, family and model
	BLAS      string `json:"blas"`
	Device    string `json:"device"`  // the learner's device (Device.Info)
	Threads   int    `json:"threads"` // GOMAXPROCS
	Params    int    `json:"params"`
	Batch     int    `json:"batch"`
	PromptLen int    `json:"prompt_len"`
	NewTokens int    `json:"new_tokens"`
	SeqTokens int    `json:"seq_tokens"` // batch × (prompt + new): tokens per learner/score batch

	// Each figure is the median over the timed runs.
	LearnerStepSec float64 `json:"learner_step_s"`   // GRPO forward + backward + clip + AdamW
	LearnerGFLOPS  float64 `json:"learner_gflops"`   // 3 × forward FLOPs / step time
	SampleTokPerS  float64 `json:"sample_tok_per_s"` // new tokens / s (prefill included in the time)
	ScoreTokPerS   float64 `json:"score_tok_per_s"`  // scored positions / s (forward only)
	ScoreGFLOPS    float64 `json:"score_gflops"`
	// The best run of each, which on a shared machine is the closest to
	// what the figure is when nothing else runs.
	LearnerStepMinSec float64 `json:"learner_step_min_s"`
	SampleTokPerSMax  float64 `json:"sample_tok_per_s_max"`
	ScoreTokPerSMax   float64 `json:"score_tok_per_s_max"`
	// SgemmGFLOPS is what the machine's float32 matrix products reach, for
	// comparison: Threads goroutines each running a 1024×1024×1024 product
	// through the build's BLAS at once (as the shards of a batch do).
	SgemmGFLOPS float64 `json:"sgemm_gflops"`
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
	o.Reps = max(o.Reps, 3)
	return o
}

// benchWorkload is the model and batches one benchmark runs on.
type benchWorkload struct {
	model   *Model
	learner *Learner
	seqs    []Sequence
	prompts [][]int
	sample  SampleOptions
	grpo    loss.Config // the learner step's loss: GRPO, bnpo, β = 0.04, as the peer's
	lb      loss.Batch
}

func newBenchWorkload(preset string, o BenchOptions) (*benchWorkload, error) {
	cfg, err := Preset(preset)
	if err != nil {
		return nil, err
	}
	return newConfigWorkload(cfg, o)
}

// newConfigWorkload is newBenchWorkload for a model of any configuration.
func newConfigWorkload(cfg Config, o BenchOptions) (*benchWorkload, error) {
	if o.PromptLen < 1 || o.NewTokens < 1 || o.Batch < 1 || o.PromptLen+o.NewTokens > cfg.Context {
		return nil, fmt.Errorf("%w: bench batch %d, prompt %d + new %d tokens (context %d)", ErrBadInput, o.Batch, o.PromptLen, o.NewTokens, cfg.Context)
	}
	if err := CheckMemory(fmt.Sprintf("the benchmark (batch %d)", o.Batch), benchBytes(cfg, o, onCPU(o.Device))); err != nil {
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
	if !onCPU(o.Device) {
		m = l.Snapshot() // sampling and scoring on the device too
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
	if err := w.setLoss(rng); err != nil {
		return nil, err
	}
	return w, nil
}

// setLoss prepares the learner step's GRPO loss as the peer's bench does:
// old log-probs from a scoring pass, reference log-probs 0.01·N(0, 1) away
// from them, one normal advantage per sequence.
func (w *benchWorkload) setLoss(rng *rand.Rand) error {
	scores, err := w.model.Score(w.seqs, 1)
	if err != nil {
		return err
	}
	b := Batch{Seqs: w.seqs}
	w.lb, w.grpo = b.LossBatch(), loss.Default()
	w.grpo.Beta = 0.04
	w.lb.OldLogp, w.lb.RefLogp = make([]float64, len(w.lb.Mask)), make([]float64, len(w.lb.Mask))
	for i, s := range scores {
		w.lb.Advantages = append(w.lb.Advantages, rng.NormFloat64())
		for t, lp := range s.LogProbs {
			w.lb.OldLogp[i*w.lb.T+t] = lp
			w.lb.RefLogp[i*w.lb.T+t] = lp + 0.01*rng.NormFloat64()
		}
	}
	return nil
}

// onCPU reports whether d is the CPU (nil is).
func onCPU(d Device) bool {
	_, cpu := d.(CPU)
	return d == nil || cpu
}

// benchBytes estimates the host memory of a benchmark: the model, the
// learner with its batch workspace, the sampler, the scoring workspace
// (the last three only on the CPU: a device sizes its own), the batch's
// token slices and the sgemm operands (per thread).
func benchBytes(cfg Config, o BenchOptions, cpu bool) int64 {
	seqLen := o.PromptLen + o.NewTokens
	t := min((seqLen+7)/8*8, cfg.Context)
	tokens := 16 * float64(o.Batch) * float64(seqLen)
	sgemm := 3 * 4 * 1024 * 1024 * float64(runtime.GOMAXPROCS(0))
	sum := float64(cfg.ModelBytes()) + tokens + sgemm
	if cpu {
		sum += float64(cfg.LearnerBytes(o.Batch, t)) + float64(cfg.ScoreBytes(o.Batch, t)) + float64(cfg.SampleBytes(o.Batch, 1, o.PromptLen, o.NewTokens))
	}
	return toBytes(sum)
}

func (w *benchWorkload) learnerStep() error {
	_, err := w.learner.Step(Batch{Seqs: w.seqs}, 1, func(lp, _ []float64) (loss.Result, error) {
		return loss.Policy(w.grpo, w.lb, lp)
	})
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
// reps runs, and returns the median seconds per run (robust to the odd run
// slowed by another process on a shared machine) and the fastest run's.
func timeIt(minTime time.Duration, reps int, f func() error) (median, best float64, err error) {
	if err := f(); err != nil {
		return 0, 0, err
	}
	var runs []float64
	for start := time.Now(); len(runs) < reps || time.Since(start) < minTime; {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, 0, err
		}
		runs = append(runs, time.Since(t0).Seconds())
	}
	slices.Sort(runs)
	return (runs[(len(runs)-1)/2] + runs[len(runs)/2]) / 2, runs[0], nil
}

// sgemmGFLOPS measures what the machine's matrix products reach at the
// model's parallelism: workers goroutines each running its own 1024³
// float32 product through the build's BLAS, as the shards of a batch do.
func sgemmGFLOPS(minTime time.Duration, reps, workers int) float64 {
	const n = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([][3][]float32, workers)
	for i := range ops {
		for j := range ops[i] {
			ops[i][j] = make([]float32, n*n)
		}
		for j := range ops[i][0] {
			ops[i][0][j], ops[i][1][j] = rng.Float32(), rng.Float32()
		}
	}
	sec, _, _ := timeIt(minTime, reps, func() error {
		parallelFor(workers, workers, func(i, _, _ int) {
			gemm(false, true, n, n, n, 1, ops[i][0], n, ops[i][1], n, 0, ops[i][2], n)
		})
		return nil
	})
	return float64(workers) * 2 * n * n * n / sec / 1e9
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
	r := BenchResult{Preset: preset, CPU: CPUName(), BLAS: BLASInfo(), Device: o.Device.Info(), Threads: runtime.GOMAXPROCS(0), Params: cfg.NumParams(),
		Batch: o.Batch, PromptLen: o.PromptLen, NewTokens: o.NewTokens, SeqTokens: o.Batch * seqLen}
	flops := cfg.FlopsPerToken(seqLen) * float64(r.SeqTokens)
	if r.LearnerStepSec, r.LearnerStepMinSec, err = timeIt(o.MinTime, o.Reps, w.learnerStep); err != nil {
		return r, fmt.Errorf("bench %s: learner: %w", preset, err)
	}
	r.LearnerGFLOPS = 3 * flops / r.LearnerStepSec / 1e9
	if !o.SkipSample {
		sec, best, err := timeIt(o.MinTime, o.Reps, w.sampleBatch)
		if err != nil {
			return r, fmt.Errorf("bench %s: sample: %w", preset, err)
		}
		r.SampleTokPerS, r.SampleTokPerSMax = float64(o.Batch*o.NewTokens)/sec, float64(o.Batch*o.NewTokens)/best
	}
	sec, best, err := timeIt(o.MinTime, o.Reps, w.score)
	if err != nil {
		return r, fmt.Errorf("bench %s: score: %w", preset, err)
	}
	r.ScoreTokPerS, r.ScoreGFLOPS, r.ScoreTokPerSMax = float64(r.SeqTokens)/sec, flops/sec/1e9, float64(r.SeqTokens)/best
	r.SgemmGFLOPS = sgemmGFLOPS(o.MinTime/4, o.Reps, runtime.GOMAXPROCS(0))
	return r, nil
}

// CPUName names the processor from /proc/cpuinfo: model name, vendor,
// family and model (hypervisors often report a bare "AMD EPYC"), or the
// architecture where that file is missing.
func CPUName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	field := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			break // the first processor is enough
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			field[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	name := cmp.Or(field["model name"], runtime.GOARCH)
	if v := field["vendor_id"]; v != "" {
		name += fmt.Sprintf(" (%s family %s model %s)", v, field["cpu family"], field["model"])
	}
	return name
}
