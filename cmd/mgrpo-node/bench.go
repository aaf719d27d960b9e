package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/spf13/pflag"
)

// runBench runs `mgrpo-node bench --preset P`: it measures the learner
// step, sampling and scoring of a preset on this machine (gpu.Bench,
// DESIGN §6) and prints the result as one JSON object.
func runBench(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node bench", pflag.ContinueOnError)
	preset := fs.String("preset", "base", "model preset: tiny, small or base")
	var o gpu.BenchOptions
	fs.IntVar(&o.Batch, "batch", 128, "sequences per batch")
	fs.IntVar(&o.PromptLen, "prompt_len", 16, "prompt tokens per sequence (BOS included)")
	fs.IntVar(&o.NewTokens, "new_tokens", 16, "completion tokens (learner, score) and new tokens (sample)")
	fs.DurationVar(&o.MinTime, "min_time", 0, "measure each figure for at least this long (0: 1s)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the weights and the batch")
	device := fs.String("device", "cpu", "device of the learner step: cpu, or cuda in a binary built with -tags cuda")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if _, err := gpu.Preset(*preset); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node bench: --preset: %v\n", err)
		return exitUsage
	}
	if o.Batch < 1 || o.PromptLen < 1 || o.NewTokens < 1 || o.MinTime < 0 {
		fmt.Fprintf(stderr, "mgrpo-node bench: --batch %d, --prompt_len %d and --new_tokens %d must be ≥ 1, --min_time %v ≥ 0\n",
			o.Batch, o.PromptLen, o.NewTokens, o.MinTime)
		return exitUsage
	}
	dev, err := gpu.OpenDevice(*device)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node bench: --device: %v\n", err)
		return exitUsage
	}
	defer dev.Close()
	o.Device = dev
	r, err := gpu.Bench(*preset, o)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node bench: %v\n", err)
		return exitUsage
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node bench: %v\n", err)
		return exitFailed
	}
	return exitOK
}
