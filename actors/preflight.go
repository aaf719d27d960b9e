package actors

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// preflight checks, before Run creates the run directory, what can be
// checked without training: that model.checkpoint has a valid config.json
// and a weights file, that every dataset prompt fits the model's context,
// and that the run fits in the memory available.
func preflight(d *Deps) error {
	model := d.Model
	if ckpt := d.Cfg.Model.Checkpoint; ckpt != "" {
		c, err := gpu.ReadCheckpointConfig(ckpt)
		if err != nil {
			return fmt.Errorf("model.checkpoint: %w", err)
		}
		if _, err := os.Stat(filepath.Join(ckpt, gpu.WeightsFileName)); err != nil {
			return fmt.Errorf("model.checkpoint: %w", err)
		}
		model = c
	}
	if err := checkDatasetPrompts(d, model.Context); err != nil {
		return err
	}
	prompt, err := longestPrompt(d)
	if err != nil {
		return err
	}
	return gpu.CheckMemory(runMemoryWhat(d), runBytes(d, model, prompt))
}

// promptSamples is how many problems of a generated task longestPrompt
// draws to estimate its longest prompt.
const promptSamples = 512

// longestPrompt returns the longest prompt in tokens, BOS included: over
// every problem of a dataset, or over promptSamples problems drawn from a
// generated task (plus a margin of 8 tokens, for rarer longer ones).
func longestPrompt(d *Deps) (int, error) {
	longest := func(text string) (int, error) {
		ids, err := d.Tokenizer.Encode(text)
		return len(ids) + 1, err
	}
	n := 0
	if ds, ok := d.Task.(*tasks.Dataset); ok {
		for i := range ds.Len() {
			l, err := longest(ds.At(i).Prompt)
			if err != nil {
				return 0, fmt.Errorf("task.dataset %s: problem %d: %w", d.Cfg.Task.Dataset, i+1, err)
			}
			n = max(n, l)
		}
		return n, nil
	}
	rng := rand.New(rand.NewPCG(uint64(d.Cfg.Train.Seed), 0x70726f6d7074))
	for range promptSamples {
		l, err := longest(d.Task.Generate(rng).Prompt)
		if err != nil {
			return 0, fmt.Errorf("task %s: %w", d.Cfg.Task.Name, err)
		}
		n = max(n, l)
	}
	return n + 8, nil
}

// checkDatasetPrompts refuses a dataset prompt that, encoded behind BOS,
// leaves no room for a completion in the context.
func checkDatasetPrompts(d *Deps, context int) error {
	ds, ok := d.Task.(*tasks.Dataset)
	if !ok {
		return nil
	}
	for i := range ds.Len() {
		ids, err := d.Tokenizer.Encode(ds.At(i).Prompt)
		if err != nil {
			return fmt.Errorf("task.dataset %s: problem %d: %w", d.Cfg.Task.Dataset, i+1, err)
		}
		if n := len(ids) + 1; n >= context {
			return fmt.Errorf("task.dataset %s: problem %d: prompt of %d tokens (BOS included) leaves no room for a completion in the model's context of %d",
				d.Cfg.Task.Dataset, i+1, n, context)
		}
	}
	return nil
}

// runMemoryWhat names what runBytes estimates, for the error line.
func runMemoryWhat(d *Deps) string {
	c := d.Cfg
	return fmt.Sprintf("training (weights, AdamW state, %d generators and learner batches of %d prompts × %d generations)",
		max(c.Cluster.Generators, 1), c.Train.PromptsPerStep, c.Generation.NumGenerations)
}

// runBytes estimates the memory of a run of model whose longest prompt has
// promptLen tokens: the learner training prompts_per_step ×
// num_generations sequences padded to the longest prompt plus
// max_completion_len (at most the context, as the learner pads), the
// policy, reference and a snapshot of the weights, each generator's
// sampler, the reference scoring workspace and the warm start's learner
// batch.
func runBytes(d *Deps, model gpu.Config, promptLen int) int64 {
	c := d.Cfg
	b := int64(c.Train.PromptsPerStep) * int64(c.Generation.NumGenerations)
	bi := int(min(b, int64(1)<<40))
	promptLen = min(promptLen, model.Context)
	seq := min(promptLen+c.Generation.MaxCompletionLen, model.Context)
	sum := float64(model.LearnerBytes(bi, seq)) + 3*float64(model.ModelBytes()) +
		float64(max(c.Cluster.Generators, 1))*float64(model.SampleBytes(c.Train.PromptsPerStep, c.Generation.NumGenerations, promptLen, c.Generation.MaxCompletionLen)) +
		float64(model.ScoreBytes(bi, seq))
	if c.Model.Checkpoint == "" && c.Train.Resume == "" && c.Train.WarmStartSteps > 0 {
		warm := float64(model.LearnerBytes(c.Train.WarmStartBatch, seq)) - float64(model.LearnerBytes(0, seq))
		sum += max(warm, 0)
	}
	if sum >= float64(1<<62) {
		return 1 << 62
	}
	return int64(sum)
}
