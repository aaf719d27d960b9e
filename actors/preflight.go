package actors

import (
	"fmt"
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
	return gpu.CheckMemory(runMemoryWhat(d), runBytes(d, model))
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

// runBytes estimates the memory of a run of model: the learner training
// prompts_per_step × num_generations sequences padded to the context,
// the policy, reference and a snapshot of the weights, each generator's
// sampler (prompts taking the context left by max_completion_len), the
// reference scoring workspace and the warm start's learner batch.
func runBytes(d *Deps, model gpu.Config) int64 {
	c := d.Cfg
	b := int64(c.Train.PromptsPerStep) * int64(c.Generation.NumGenerations)
	bi := int(min(b, int64(1)<<40))
	promptLen := max(model.Context-c.Generation.MaxCompletionLen, 1)
	sum := float64(model.LearnerBytes(bi, model.Context)) + 3*float64(model.ModelBytes()) +
		float64(max(c.Cluster.Generators, 1))*float64(model.SampleBytes(c.Train.PromptsPerStep, c.Generation.NumGenerations, promptLen, c.Generation.MaxCompletionLen)) +
		float64(model.ScoreBytes(bi, model.Context))
	if c.Model.Checkpoint == "" && c.Train.Resume == "" && c.Train.WarmStartSteps > 0 {
		warm := float64(model.LearnerBytes(c.Train.WarmStartBatch, model.Context)) - float64(model.LearnerBytes(0, model.Context))
		sum += max(warm, 0)
	}
	if sum >= float64(1<<62) {
		return 1 << 62
	}
	return int64(sum)
}
