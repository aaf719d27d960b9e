package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/spf13/pflag"
)

// runBench runs `mgrpo-node bench --preset P`: it measures the learner
// step, sampling and scoring of a preset on this machine (gpu.Bench,
// DESIGN §6) and prints the result as one JSON object. With --peer DIR it
// instead runs DIR/bench.py (the PyTorch peer) and gpu.Bench back to back
// in interleaved rounds for each preset of a comma-separated --preset list
// and prints the medians and ratios (comparePeer).
func runBench(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node bench", pflag.ContinueOnError)
	preset := fs.String("preset", "base", "model preset: "+strings.Join(gpu.PresetNames(), ", ")+" (with --peer, a comma-separated list)")
	var o gpu.BenchOptions
	fs.IntVar(&o.Batch, "batch", 128, "sequences per batch")
	fs.IntVar(&o.PromptLen, "prompt_len", 16, "prompt tokens per sequence (BOS included)")
	fs.IntVar(&o.NewTokens, "new_tokens", 16, "completion tokens (learner, score) and new tokens (sample)")
	fs.DurationVar(&o.MinTime, "min_time", 0, "measure each figure for at least this long (0: 1s)")
	fs.IntVar(&o.Reps, "reps", 10, "and at least this many timed runs; each figure is their median")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the weights and the batch")
	device := fs.String("device", "cpu", "device of the learner step, sampling and scoring: cpu, or cuda (mgrpo-node hands it to mgrpo-node-cuda)")
	dtype := fs.String("dtype", gpu.DTypeFloat32, "precision of the products: float32 (TF32 on cuda) or bf16 (cuda: bf16 products, fp32 weights and optimiser)")
	fs.BoolVar(&o.SkipSample, "skip_sample", false, "leave sampling out (long completions of the large presets take long)")
	peer := fs.String("peer", "", "directory of the PyTorch peer (its bench.py): compare side by side")
	python := fs.String("peer_python", "/usr/bin/python3", "Python with torch for --peer")
	rounds := fs.Int("rounds", 3, "interleaved rounds (peer, mgrpo) per preset with --peer")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	presets := strings.Split(*preset, ",")
	if err := checkBenchFlags(presets, o, *peer, *rounds); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node bench: %v\n", err)
		return exitUsage
	}
	if *peer != "" {
		if err := checkPeer(*peer, *python); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node bench: %v\n", err)
			return exitUsage
		}
	}
	if *device == "cuda" && !gpu.CUDABuilt {
		return handOff("bench --device cuda", append([]string{"bench"}, args...), os.Environ(), stderr)
	}
	dev, err := gpu.OpenDeviceWith(*device, gpu.DeviceOptions{DType: *dtype})
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node bench: %v\n", err)
		return exitUsage
	}
	defer dev.Close()
	o.Device = dev
	if *peer != "" {
		threads := runtime.GOMAXPROCS(0)
		fmt.Fprintf(stdout, "CPU: %s, %d threads each; load average %.2f at the start\n", gpu.CPUName(), threads, loadAverage())
		fmt.Fprintf(stdout, "mgrpo: %s; peer: %s/bench.py (%s%s)\n\n", dev.Info(), *peer, *python, peerKernels(os.Getenv("OPENBLAS_CORETYPE"), gpu.BLASKernels()))
		if err := comparePeer(stdout, presets, *rounds, pythonPeer(*python, *peer, threads, o.Reps), oursRun(o)); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node bench: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "load average %.2f at the end\n", loadAverage())
		return exitOK
	}
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

// checkBenchFlags reports the first flag of `mgrpo-node bench` that cannot
// run: an unknown preset, a list of them without --peer, a size below 1,
// or --peer with another workload than the peer's.
func checkBenchFlags(presets []string, o gpu.BenchOptions, peer string, rounds int) error {
	if len(presets) > 1 && peer == "" {
		return fmt.Errorf("--preset %q: one preset (a list only with --peer)", strings.Join(presets, ","))
	}
	for _, p := range presets {
		if _, err := gpu.Preset(p); err != nil {
			return fmt.Errorf("--preset: %w", err)
		}
	}
	if o.Batch < 1 || o.PromptLen < 1 || o.NewTokens < 1 || o.MinTime < 0 || o.Reps < 1 || rounds < 1 {
		return fmt.Errorf("--batch %d, --prompt_len %d, --new_tokens %d, --reps %d and --rounds %d must be ≥ 1, --min_time %v ≥ 0",
			o.Batch, o.PromptLen, o.NewTokens, o.Reps, rounds, o.MinTime)
	}
	if peer != "" && (o.Batch != 128 || o.PromptLen != 16 || o.NewTokens != 16) {
		return fmt.Errorf("--peer compares the peer's fixed workload: leave --batch 128, --prompt_len 16, --new_tokens 16")
	}
	return nil
}
