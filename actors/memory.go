package actors

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
)

// runBytes estimates the memory of a run of model whose longest prompt has
// promptLen tokens: the learner training prompts_per_step ×
// num_generations sequences (in passes of train.micro_batch) padded to the
// longest prompt plus max_completion_len (at most the context, as the
// learner pads), the policy, reference and a snapshot of the weights,
// each generator's sampler and the reference scoring workspace (both take
// a part of train.prompts_per_part prompts at a time), the warm start's
// learner batch and its problems, the batches train.max_staleness lets
// wait for the learner (batchesAhead), and the train.eval_prompts
// problems an evaluation holds with their completions. On model.device
// cuda it is cudaHostBytes and the host's part of the rest: the problems
// and the waiting batches (heldBytes).
func runBytes(c *config.Config, model gpu.Config, promptLen int) int64 {
	promptLen = min(promptLen, model.Context)
	seq := min(promptLen+c.Generation.MaxCompletionLen, model.Context)
	sum := heldBytes(c, promptLen, seq)
	if c.Model.Device == "cuda" {
		sum += float64(cudaHostBytes(model))
	} else {
		sum += engineBytes(c, model, promptLen, seq)
	}
	if sum >= float64(1<<62) {
		return 1 << 62
	}
	return int64(sum)
}

// engineBytes is the CPU engine's part of runBytes: the learners', the
// samplers' and the scorer's workspaces and the copies of the weights.
func engineBytes(c *config.Config, model gpu.Config, promptLen, seq int) float64 {
	g := c.Generation.NumGenerations
	b := int(min(int64(c.Train.PromptsPerStep)*int64(g), int64(1)<<40))
	part := min(c.Train.PromptsPerPart, c.Train.PromptsPerStep)
	sum := float64(model.LearnerBytes(passSize(b, c.Train.MicroBatch), seq)) + 3*float64(model.ModelBytes()) +
		float64(max(c.Cluster.Generators, 1))*float64(model.SampleBytes(part, g, promptLen, c.Generation.MaxCompletionLen)) +
		float64(model.ScoreBytes(int(min(int64(part)*int64(g), int64(1)<<40)), seq))
	if warmStarts(c) {
		warm := float64(model.LearnerBytes(passSize(c.Train.WarmStartBatch, c.Train.MicroBatch), seq)) - float64(model.LearnerBytes(0, seq))
		sum += max(warm, 0)
	}
	return sum
}

// heldBytes is what a run holds in host memory whichever engine computes:
// the warm start's problems and sequences, the batches waiting for the
// learner and an evaluation's problems and completions.
func heldBytes(c *config.Config, promptLen, seq int) float64 {
	b := float64(c.Train.PromptsPerStep) * float64(c.Generation.NumGenerations)
	sum := waitingBatches(c)*b*rolloutBytes(c.Generation.MaxCompletionLen) +
		float64(c.Train.EvalPrompts)*problemBytes(promptLen, c.Generation.MaxCompletionLen)
	if warmStarts(c) {
		sum += float64(c.Train.WarmStartBatch) * (problemBytes(promptLen, 0) + 8*float64(seq))
	}
	return sum
}

// warmStarts reports whether a run begins with the supervised warm start.
func warmStarts(c *config.Config) bool {
	return (c.Model.Checkpoint == "" || c.Train.WarmStartFromCheckpoint) && c.Train.Resume == "" && c.Train.WarmStartSteps > 0
}

// waitingBatches is how many steps' batches beyond the one in the learner
// train.max_staleness lets the generators make ahead and hold: at most
// one per step of the run.
func waitingBatches(c *config.Config) float64 {
	ahead := batchesAhead(c.Train.MaxStaleness, c.Train.SyncEvery) - 1
	return float64(min(ahead, max(c.Train.Steps, 0)))
}

// rolloutBytes is the memory of one sampled sequence of a batch waiting
// for the learner: the message's fields (ids, generator, prompt index:
// 256 bytes) and per completion token its id, its log-probability and
// entropy, its text and the reference's log-probability (24 bytes).
func rolloutBytes(completionLen int) float64 {
	return 256 + 24*float64(completionLen)
}

// problemBytes is the memory an evaluation holds per problem until it
// scores them all, and a warm start per problem of its batch: the problem
// (its prompt and answer), the prompt's copy and a completion of
// completionLen tokens with its text. The warm start adds its sequence's
// token ids.
func problemBytes(promptLen, completionLen int) float64 {
	return 160 + 2*float64(promptLen) + 4*float64(completionLen)
}

// cudaHostBytes estimates the host memory of a run on model.device cuda,
// whose learner, samplers and scorer keep their weights and workspaces in
// GPU memory (the CUDA engine refuses at start what does not fit there):
// the weights as read or made on the host, and a checkpoint's copies of
// the weights and AdamW's two moments.
func cudaHostBytes(model gpu.Config) int64 {
	return 4 * model.WeightBytes()
}

// passSize is how many of a batch's b sequences one learner pass takes
// with train.micro_batch micro (0: all).
func passSize(b, micro int) int {
	if micro > 0 {
		return min(b, micro)
	}
	return b
}

// runMemoryWhat names what runBytes estimates, for the error line.
func runMemoryWhat(c *config.Config) string {
	if c.Model.Device == "cuda" {
		return "the host's part of a GPU run (the weights, a checkpoint's copies of them and of AdamW's moments)"
	}
	return fmt.Sprintf("training (weights, AdamW state, %d generators and learner batches of %d prompts × %d generations)",
		max(c.Cluster.Generators, 1), c.Train.PromptsPerStep, c.Generation.NumGenerations)
}

// checkRunMemory refuses a run whose estimate (runBytes) exceeds the
// memory available (gpu.CheckMemory), naming the settings that would make
// it fit; it returns the estimate. The refusal is a configuration error
// (exit 2: the run cannot start as configured here) that also wraps
// gpu.ErrMemory; its key is the first setting that alone makes the run
// fit, or model when none does.
func checkRunMemory(cfg *config.Config, model gpu.Config, prompt int) (int64, error) {
	need := runBytes(cfg, model, prompt)
	err := gpu.CheckMemory(runMemoryWhat(cfg), need)
	if errors.Is(err, gpu.ErrMemory) {
		key, hint := fitHint(cfg, model, prompt, gpu.ReadMemory().Available())
		return need, &memoryError{key: key, hint: hint, err: err}
	}
	return need, err
}

// memoryError is a run refused for its memory: a configuration error
// (*config.Error, ErrConflict) naming key, and a gpu.ErrMemory. Its line
// is whole, the estimate and every setting that fits, which a
// config.Error would cut at 200 bytes.
type memoryError struct {
	key  string // the setting to change: the first careless one that fits alone, else the first that does, else model
	hint string // fitHint's
	err  error  // gpu.CheckMemory's
}

func (e *memoryError) Error() string {
	return fmt.Sprintf("config: %s: %s; %s", e.key, e.err, e.hint)
}

// Unwrap returns the configuration error and the memory error.
func (e *memoryError) Unwrap() []error {
	return []error{&config.Error{Key: e.key, Reason: "not enough memory", Err: config.ErrConflict}, e.err}
}

// A knob is a setting that lowers a run's memory: its key, its smallest
// value, its value in a configuration, and that configuration with
// another value.
type knob struct {
	key      string
	lo       int
	careless bool // large only when set carelessly: named as the key when it fits alone
	get      func(c *config.Config) int
	with     func(c config.Config, v int) config.Config
}

// memoryKnobs are the settings fitHint lowers, in the order it names them:
// the learner's passes first (the same step, in smaller passes), then the
// batch and the completions, then what only a careless value makes large:
// the warm start's batch, the batches waiting for the learner, the
// evaluation's problems.
func memoryKnobs() []knob {
	return []knob{
		{"train.micro_batch", 1, false, func(c *config.Config) int {
			return passSize(c.Train.PromptsPerStep*c.Generation.NumGenerations, c.Train.MicroBatch)
		}, func(c config.Config, v int) config.Config { c.Train.MicroBatch = v; return c }},
		{"train.prompts_per_step", 1, false, func(c *config.Config) int { return c.Train.PromptsPerStep },
			func(c config.Config, v int) config.Config { c.Train.PromptsPerStep = v; return c }},
		{"generation.max_completion_len", 1, false, func(c *config.Config) int { return c.Generation.MaxCompletionLen },
			func(c config.Config, v int) config.Config { c.Generation.MaxCompletionLen = v; return c }},
		{"train.warm_start_batch", 1, true, func(c *config.Config) int { return c.Train.WarmStartBatch },
			func(c config.Config, v int) config.Config { c.Train.WarmStartBatch = v; return c }},
		{"train.max_staleness", 0, true, func(c *config.Config) int { return c.Train.MaxStaleness },
			func(c config.Config, v int) config.Config {
				c.Train.MaxStaleness, c.Train.SyncEvery = v, min(c.Train.SyncEvery, v+1)
				return c
			}},
		{"train.eval_prompts", 1, true, func(c *config.Config) int { return c.Train.EvalPrompts },
			func(c config.Config, v int) config.Config { c.Train.EvalPrompts = v; return c }},
	}
}

// fitHint says which single change of a memoryKnobs setting makes a run
// that needs more than avail bytes fit, each at the largest value that
// does (runBytes grows with every knob: a binary search), with its
// estimate; or that none does. key is the first careless setting named,
// else the first named, else model.
func fitHint(cfg *config.Config, model gpu.Config, prompt int, avail int64) (key, hint string) {
	var fits []string
	key = "model"
	keyCareless := false
	for _, k := range memoryKnobs() {
		cur := k.get(cfg)
		need := func(v int) int64 { c := k.with(*cfg, v); return runBytes(&c, model, prompt) }
		v := sort.Search(cur, func(v int) bool { return v >= k.lo && need(v) > avail }) - 1 // the largest v < cur that fits
		if v < k.lo {
			continue
		}
		if len(fits) == 0 || (k.careless && !keyCareless) {
			key, keyCareless = k.key, k.careless
		}
		fits = append(fits, fmt.Sprintf("%s %d (%s)", k.key, v, formatGB(need(v))))
	}
	if len(fits) == 0 {
		return key, "no value of train.micro_batch, train.prompts_per_step or generation.max_completion_len alone fits: a smaller model, or a machine with more memory"
	}
	return key, "it fits with " + strings.Join(fits, ", or ")
}

// formatGB writes a byte count in GB, one decimal.
func formatGB(b int64) string { return fmt.Sprintf("%.1f GB", float64(b)/1e9) }

// goMemoryLimitEnv is the environment variable that sets the Go runtime's
// memory limit; a run leaves a limit set there as it is.
const goMemoryLimitEnv = "GOMEMLIMIT"

// memoryLimit is the Go memory limit (runtime/debug.SetMemoryLimit) of a
// run whose estimate is plan bytes, on a machine read as r: the plan, half
// of it again and 1 GiB (the runtime, the data set, what the estimate does
// not count), at most the memory the process can have (what it holds and
// what the machine has available), and never below the plan. Under it,
// the garbage collector runs before the process takes memory it does not
// need, and the heap it frees stays the process's (gpu.ReadMemory).
func memoryLimit(plan int64, r gpu.MemoryReading) int64 {
	limit := plan + plan/2 + 1<<30
	if r.Known {
		limit = min(limit, r.Machine+r.Held)
	}
	return max(limit, plan)
}

// setMemoryLimit sets the Go memory limit of a run whose estimate is plan
// bytes (memoryLimit), unless the environment set one (userLimit), and
// returns the line that says so and a function restoring the limit before.
func setMemoryLimit(plan int64, userLimit string) (line string, restore func()) {
	if userLimit != "" {
		return fmt.Sprintf("memory: the run needs about %s; Go memory limit %s=%s", formatGB(plan), goMemoryLimitEnv, userLimit), func() {}
	}
	limit := memoryLimit(plan, gpu.ReadMemory())
	prev := debug.SetMemoryLimit(limit)
	return fmt.Sprintf("memory: the run needs about %s; Go memory limit %s (%s sets another)", formatGB(plan), formatGB(limit), goMemoryLimitEnv),
		func() { debug.SetMemoryLimit(prev) }
}

// goGCEnv is the environment variable that sets the garbage collector's
// target; a worker node leaves a target set there as it is.
const goGCEnv = "GOGC"

// workerGCPercent is a worker node's garbage-collection target
// (runtime/debug.SetGCPercent): a collection once the heap has grown by 4×
// what was live after the last one, against the runtime's 1×. A worker's
// heap is its model and the few messages of a step in flight, which it
// allocates afresh every step; at 100 the three Go heaps of a 3-process
// run on shared cores spent a measurable part of a step collecting
// (docs/BENCHMARKS.md, "Fewer round trips").
const workerGCPercent = 400

// setWorkerGC sets workerGCPercent unless userGC (the environment's GOGC)
// sets a target, and then, unless userLimit (GOMEMLIMIT) sets one, a Go
// memory limit of the memory the machine has available to the process,
// under which the collector runs however far the target is: the heap may
// grow further between collections, never into what the machine lacks. It
// returns the line that says so ("" when the environment decides) and a
// function restoring both.
func setWorkerGC(userGC, userLimit string) (line string, restore func()) {
	if userGC != "" {
		return "", func() {}
	}
	prevGC := debug.SetGCPercent(workerGCPercent)
	prevLimit := debug.SetMemoryLimit(-1) // reads it
	r := gpu.ReadMemory()
	if userLimit == "" && r.Known {
		debug.SetMemoryLimit(r.Machine + r.Held)
	}
	return fmt.Sprintf("memory: garbage collection at %s=%d (a worker's default; %s sets another)", goGCEnv, workerGCPercent, goGCEnv),
		func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) }
}

// reserveLearner sizes the RL learner's workspace for the run's largest
// step (gpu.Learner.Reserve): train.prompts_per_step groups of
// num_generations sequences, each group sharing a prompt of the longest
// prompt's length, each sequence with a completion of max_completion_len
// tokens (within the context). On a device with memory of its own (cuda)
// a step that cannot fit is then refused before the first one, naming the
// settings that lower it; on the CPU it does nothing (checkRunMemory
// counted the host's memory).
func reserveLearner(l *gpu.Learner, s *settings) error {
	prompt := max(min(s.longestPrompt, s.model.Context-1), 1)
	completion := max(min(s.stages.generate.sample.MaxNewTokens, s.model.Context-prompt), 1)
	seqs := make([]gpu.Sequence, 0, s.step.prompts*s.step.group)
	for g := range s.step.prompts {
		p := make([]int, prompt)
		p[0] = g % s.model.Vocab // no group shares another's prompt
		for range s.step.group {
			seqs = append(seqs, gpu.Sequence{Prompt: p, Completion: make([]int, completion)})
		}
	}
	if err := l.Reserve(gpu.Batch{Seqs: seqs}); err != nil {
		return fmt.Errorf("%w (train.micro_batch, train.prompts_per_step or generation.max_completion_len lowers it)", err)
	}
	return nil
}
