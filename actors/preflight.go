package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// preflight checks, before Run creates the run directory, what can be
// checked without training: that model.checkpoint has a valid config.json
// and a weights file, that every dataset prompt fits the model's context,
// that the run fits in the memory available, and that a learner node's
// largest message fits cluster.max_message_bytes. It is part of the
// wiring: it reads cfg for what the run's settings do not keep. It sizes
// the stages' request timeouts from the longest prompt (sizeTimeouts) and
// returns the run's memory estimate (runBytes).
func preflight(cfg *config.Config, s *settings) (int64, error) {
	model := s.model
	if err := writableFile("trace.file", cfg.Trace.File); err != nil {
		return 0, err
	}
	if ckpt := cfg.Model.Checkpoint; ckpt != "" {
		c, err := gpu.ReadCheckpointConfig(ckpt)
		if err != nil {
			return 0, pathError("model.checkpoint", ckpt, err)
		}
		if err := readableWeights(ckpt); err != nil {
			return 0, pathError("model.checkpoint", ckpt, err)
		}
		model = c
		if n := cfg.Generation.MaxCompletionLen; n >= model.Context {
			return 0, fmt.Errorf("generation.max_completion_len = %d: must be below the context of model.checkpoint (%d) to leave room for the prompt", n, model.Context)
		}
	}
	prompt, problem, err := longestPrompt(s.step)
	if err != nil && cfg.Task.Dataset != "" {
		return 0, pathError("task.dataset", cfg.Task.Dataset, err)
	}
	if err != nil {
		return 0, fmt.Errorf("task %s: %w", cfg.Task.Name, err)
	}
	if problem > 0 && prompt >= model.Context {
		return 0, pathError("task.dataset", cfg.Task.Dataset, fmt.Errorf("problem %d: prompt of %d tokens (BOS included) leaves no room for a completion in the model's context of %d",
			problem, prompt, model.Context))
	}
	plan, err := checkRunMemory(cfg, model, prompt)
	if err != nil {
		return 0, err
	}
	s.sizeTimeouts(cfg, model, prompt+cfg.Generation.MaxCompletionLen)
	s.longestPrompt = prompt
	if cl := cfg.Cluster; cl.HasRole(config.RoleLearner) && !cl.HasRole(config.RoleAll) {
		join, err := joinReply(s, runName(cfg))
		if err != nil {
			return 0, err
		}
		return plan, checkMessageBound(cl.MaxMessageBytes, messageBound(s, join))
	}
	return plan, nil
}

// promptSamples is how many problems of a generated task longestPrompt
// draws to estimate its longest prompt.
const promptSamples = 512

// longestPrompt returns the longest prompt in tokens of s's task, as the
// policy reads it (BOS and any chat template included), and for a dataset
// the 1-based number of the problem holding it: over every problem of a
// dataset, or over promptSamples problems drawn from a generated task
// (plus a margin of 8 tokens for rarer longer ones; problem 0).
func longestPrompt(s stepSettings) (tokens, problem int, err error) {
	length := func(text string) (int, error) {
		ids, err := s.prompter.Encode(text)
		return len(ids), err
	}
	if ds, ok := s.task.(*tasks.Dataset); ok {
		for i := range ds.Len() {
			n, err := length(ds.At(i).Prompt)
			if err != nil {
				return 0, 0, fmt.Errorf("problem %d: %w", i+1, err)
			}
			if n > tokens {
				tokens, problem = n, i+1
			}
		}
		return tokens, problem, nil
	}
	rng := rand.New(rand.NewPCG(uint64(s.seed), 0x70726f6d7074))
	for range promptSamples {
		n, err := length(s.task.Generate(rng).Prompt)
		if err != nil {
			return 0, 0, err
		}
		tokens = max(tokens, n)
	}
	return tokens + 8, 0, nil
}

// writableFile refuses a path that key names for the run to append to
// (trace.file) when it could not be opened for writing: its directory
// missing, not a directory or not writable, or the path a directory or
// a file not writable. It creates nothing; "" passes.
func writableFile(key, path string) error {
	if path == "" {
		return nil
	}
	target, want := path, "a writable file"
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return pathError(key, path, errors.New("is not a regular file"))
		}
	} else {
		target, want = filepath.Dir(path), "a writable directory"
		fi, err := os.Stat(target)
		if err != nil {
			return pathError(key, path, fmt.Errorf("directory %s: %w", target, unwrapPath(err)))
		}
		if !fi.IsDir() {
			return pathError(key, path, fmt.Errorf("%s is not a directory", target))
		}
	}
	if err := writable(target); err != nil {
		return pathError(key, path, fmt.Errorf("%s is not %s: %w", target, want, err))
	}
	return nil
}

// readableWeights checks that every weight file of the checkpoint in dir
// (model.safetensors, or the shards its index names) can be opened, so
// that a missing shard stops the run before it starts, not at the load.
func readableWeights(dir string) error {
	files, err := gpu.WeightFiles(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := readableFile(f); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
	}
	return nil
}
