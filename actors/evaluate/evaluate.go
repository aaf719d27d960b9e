package evaluate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/seeds"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// Evaluation seed stream: problems come from
// rand.NewPCG(seed+EvalSeedOffset, EvalStream), never from the training
// stream rand.NewPCG(seed, ·).
const (
	EvalSeedOffset = 1_000_003
	EvalStream     = 0x65766131 // "eva1"
)

// DefaultBatchSize is how many prompts go to the sampler per call when
// Options.BatchSize is 0.
const DefaultBatchSize = 64

// Sentinel errors.
var (
	// ErrOptions reports invalid evaluation options.
	ErrOptions = errors.New("evaluate: invalid options")
	// ErrSampler reports a sampler that returned the wrong number of
	// completions or an unusable one.
	ErrSampler = errors.New("evaluate: bad sampler output")
)

// Completion is one sampled completion.
type Completion struct {
	// Text is the decoded completion, the text before EOS.
	Text string
	// Tokens is the number of generated tokens.
	Tokens int
	// EntropySum is the sum over the generated tokens of the entropy (nats)
	// of the distribution each token was drawn from.
	EntropySum float64
}

// Sampler draws completions from a policy.
type Sampler interface {
	// Sample returns n completions for each prompt, prompt-major
	// (completion j of prompt i at index i*n+j), drawn at temperature
	// (0 = greedy, argmax) with a generator seeded by seed.
	Sample(ctx context.Context, prompts []string, n int, temperature float64, seed uint64) ([]Completion, error)
}

// Options configures one evaluation.
type Options struct {
	// N is the number of evaluation problems (at least 1).
	N int
	// K is the number of samples per problem for pass@k, mean@k and
	// coverage (at least 1).
	K int
	// Temperature is the sampling temperature of the K samples (> 0).
	Temperature float64
	// Seed selects the problems and the sampling streams.
	Seed uint64
	// BatchSize is the number of prompts per Sample call; 0 means
	// DefaultBatchSize.
	BatchSize int
	// GreedyOnly measures only the greedy completions (the in-training
	// evaluation): K and Temperature are ignored, and the Result has K = 0
	// and zero sample metrics.
	GreedyOnly bool
}

// Result is what Run measures. Its JSON form is what `mgrpo-node eval`
// prints.
type Result struct {
	Task        string  `json:"task"`
	N           int     `json:"n"`
	K           int     `json:"k"`
	Temperature float64 `json:"temperature"`
	Seed        uint64  `json:"seed"`

	// GreedyAccuracy is the fraction of problems whose greedy completion
	// is correct.
	GreedyAccuracy float64 `json:"greedy_accuracy"`
	// GreedyReward is the mean accuracy reward of the greedy completions
	// (1 correct, 0.1 well formed, 0 otherwise).
	GreedyReward float64 `json:"greedy_reward"`
	// PassAtK is the fraction of problems with at least one correct sample.
	PassAtK float64 `json:"pass_at_k"`
	// MeanAtK is the fraction of correct samples.
	MeanAtK float64 `json:"mean_at_k"`
	// Coverage is the mean number of distinct correct answers per problem,
	// distinct after the task's Canonical.
	Coverage float64 `json:"coverage"`
	// WellFormed is the fraction of samples with the answer format.
	WellFormed float64 `json:"well_formed"`
	// EntropyPerToken is the token-weighted mean policy entropy (nats) of
	// the samples.
	EntropyPerToken float64 `json:"entropy_per_token"`
	// MeanLength is the mean number of tokens of a sample.
	MeanLength float64 `json:"mean_length"`
}

// Finite is a task with a fixed list of problems: a data set
// (*tasks.Dataset).
type Finite interface {
	Len() int
	At(i int) tasks.Problem
}

// Problems draws the n evaluation problems of seed from task (see the
// package documentation for the stream): from a Finite task, n distinct
// rows in a seeded order, or all its rows when it has fewer; from a
// generated one, n problems.
func Problems(task tasks.Task, n int, seed uint64) []tasks.Problem {
	rng := rand.New(rand.NewPCG(seed+EvalSeedOffset, EvalStream))
	d, ok := task.(Finite)
	if !ok {
		return tasks.Batch(task, rng, n)
	}
	rows := rng.Perm(d.Len())
	out := make([]tasks.Problem, min(n, len(rows)))
	for i := range out {
		out[i] = d.At(rows[i])
	}
	return out
}

// Run evaluates the policy behind s on task: greedy completions and K
// samples at opts.Temperature for each of opts.N problems (Problems: at
// most the rows of a data set; Result.N says how many).
func Run(ctx context.Context, s Sampler, task tasks.Task, opts Options) (Result, error) {
	if err := opts.check(); err != nil {
		return Result{}, err
	}
	problems := Problems(task, opts.N, opts.Seed)
	prompts := make([]string, len(problems))
	for i, p := range problems {
		prompts[i] = p.Prompt
	}
	if err := checkMemory(s, prompts, opts); err != nil {
		return Result{}, fmt.Errorf("evaluate %s: %w", task.Name(), err)
	}
	greedy, err := sampleChunked(ctx, s, prompts, 1, 0, opts)
	if err != nil {
		return Result{}, fmt.Errorf("evaluate %s: greedy: %w", task.Name(), err)
	}
	var samples []Completion
	k := 0
	if !opts.GreedyOnly {
		k = opts.K
		samples, err = sampleChunked(ctx, s, prompts, k, opts.Temperature, opts)
		if err != nil {
			return Result{}, fmt.Errorf("evaluate %s: sample k=%d: %w", task.Name(), k, err)
		}
	}
	res, err := Score(task, problems, greedy, samples, k)
	if err != nil {
		return Result{}, fmt.Errorf("evaluate %s: %w", task.Name(), err)
	}
	res.Temperature, res.Seed = opts.Temperature, opts.Seed
	return res, nil
}

// check validates the options.
func (o Options) check() error {
	switch {
	case o.N < 1:
		return fmt.Errorf("%w: n = %d: must be 1 or more", ErrOptions, o.N)
	case o.BatchSize < 0:
		return fmt.Errorf("%w: batch size = %d: must be 0 or more", ErrOptions, o.BatchSize)
	case o.GreedyOnly:
		return nil
	case o.K < 1:
		return fmt.Errorf("%w: k = %d: must be 1 or more", ErrOptions, o.K)
	case !(o.Temperature > 0) || math.IsInf(o.Temperature, 0):
		return fmt.Errorf("%w: temperature = %v: must be a positive number", ErrOptions, o.Temperature)
	}
	return nil
}

// MemoryChecker is implemented by samplers that can tell, before an
// evaluation starts, that one Sample call of prompts × n completions would
// not fit in memory (ModelSampler does).
type MemoryChecker interface {
	CheckMemory(prompts []string, n int) error
}

// checkMemory refuses an evaluation whose largest Sample call (one chunk
// of prompts × K) does not fit, or whose N × K completions do not.
func checkMemory(s Sampler, prompts []string, opts Options) error {
	k := 1
	if !opts.GreedyOnly {
		k = max(opts.K, 1)
	}
	if mc, ok := s.(MemoryChecker); ok {
		bs := opts.BatchSize
		if bs == 0 {
			bs = DefaultBatchSize
		}
		if err := mc.CheckMemory(prompts[:min(bs, len(prompts))], k); err != nil {
			return fmt.Errorf("k=%d: %w", k, err)
		}
	}
	const completionBytes = 64 // a Completion and a short text
	need := float64(len(prompts)) * float64(k) * completionBytes
	return gpu.CheckMemory(fmt.Sprintf("%d × %d completions", len(prompts), k), int64(min(need, 1<<62)))
}

// sampleChunked calls s on chunks of BatchSize prompts and concatenates
// the completions (prompt-major). Chunk c is sampled with seed
// sampleSeed(opts.Seed, temperature, c).
func sampleChunked(ctx context.Context, s Sampler, prompts []string, n int, temperature float64, opts Options) ([]Completion, error) {
	bs := opts.BatchSize
	if bs == 0 {
		bs = DefaultBatchSize
	}
	out := make([]Completion, 0, len(prompts)*n)
	for c, lo := 0, 0; lo < len(prompts); c, lo = c+1, lo+bs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+bs, len(prompts))
		got, err := s.Sample(ctx, prompts[lo:hi], n, temperature, sampleSeed(opts.Seed, temperature, c))
		if err != nil {
			return nil, fmt.Errorf("prompts %d..%d: %w", lo, hi-1, err)
		}
		if len(got) != (hi-lo)*n {
			return nil, fmt.Errorf("%w: %d completions for %d prompts x %d", ErrSampler, len(got), hi-lo, n)
		}
		out = append(out, got...)
	}
	return out, nil
}

// sampleSeed derives the sampler seed of chunk c from the evaluation
// seed, the chunk and whether the draw is greedy, so no two calls of one
// evaluation share a stream.
func sampleSeed(seed uint64, temperature float64, chunk int) uint64 {
	greedy := uint64(0)
	if temperature == 0 {
		greedy = 1
	}
	return seeds.Of(seed+EvalSeedOffset, uint64(chunk), greedy)
}

// Score computes the metrics from the greedy completions (one per problem)
// and the samples (k per problem, problem-major; k = 0 and no samples for
// greedy metrics only). It fills Task, N and K.
func Score(task tasks.Task, problems []tasks.Problem, greedy, samples []Completion, k int) (Result, error) {
	n := len(problems)
	if n == 0 || k < 0 || len(greedy) != n || len(samples) != n*k {
		return Result{}, fmt.Errorf("%w: %d problems, %d greedy, %d samples, k = %d", ErrSampler, n, len(greedy), len(samples), k)
	}
	res := Result{Task: task.Name(), N: n, K: k}
	var correct, wellFormed, tokens int
	var entropy float64
	for i, p := range problems {
		v := tasks.VerifyWithin(task, greedy[i].Text, p.Answer, 0)
		res.GreedyAccuracy += b2f(v == tasks.Correct)
		res.GreedyReward += v.Accuracy()
		distinct := map[string]bool{}
		c := 0
		for _, y := range samples[i*k : (i+1)*k] {
			if y.Tokens < 0 || math.IsNaN(y.EntropySum) {
				return Result{}, fmt.Errorf("%w: tokens %d, entropy %v", ErrSampler, y.Tokens, y.EntropySum)
			}
			tokens += y.Tokens
			entropy += y.EntropySum
			v := tasks.VerifyWithin(task, y.Text, p.Answer, 0)
			wellFormed += int(b2f(v.WellFormed()))
			if v == tasks.Correct {
				c++
				distinct[task.Canonical(y.Text)] = true
			}
		}
		correct += c
		if k > 0 {
			res.PassAtK += PassAtK(k, c, k)
		}
		res.Coverage += float64(len(distinct))
	}
	fn, fs := float64(n), float64(n*k)
	res.GreedyAccuracy /= fn
	res.GreedyReward /= fn
	if k == 0 {
		return res, nil
	}
	res.PassAtK /= fn
	res.Coverage /= fn
	res.MeanAtK = float64(correct) / fs
	res.WellFormed = float64(wellFormed) / fs
	res.MeanLength = float64(tokens) / fs
	if tokens > 0 {
		res.EntropyPerToken = entropy / float64(tokens)
	}
	return res, nil
}

// PassAtK is the unbiased pass@k estimator of Chen et al. (2021) from n
// samples of which c are correct:
//
//	pass@k = 1 − C(n−c, k) / C(n, k) = 1 − Π_{i=n−c+1..n} (1 − k/i)
//
// For n = k it is 1 when c > 0 and 0 otherwise. It panics unless
// 0 <= c <= n and 1 <= k <= n (a programmer error).
func PassAtK(n, c, k int) float64 {
	if c < 0 || c > n || k < 1 || k > n {
		panic(fmt.Sprintf("evaluate: PassAtK(n=%d, c=%d, k=%d)", n, c, k))
	}
	if n-c < k {
		return 1
	}
	q := 1.0
	for i := n - c + 1; i <= n; i++ {
		q *= 1 - float64(k)/float64(i)
	}
	return 1 - q
}

// b2f is 1 for true and 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
