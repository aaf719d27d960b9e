package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/optim"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/spf13/pflag"
)

// runInit runs `mgrpo-node init --preset P --seed S --out DIR`: it writes a
// freshly initialised checkpoint (config.json, model.safetensors,
// tokenizer.json) for the built-in character tokenizer. DIR must be empty
// or missing: over a training checkpoint it would leave the optimiser,
// trainer state and COMPLETE marker beside random weights. --force writes
// anyway, first removing the files that would describe another model
// (checkpointFiles).
func runInit(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node init", pflag.ContinueOnError)
	preset := fs.String("preset", "small", "model preset: tiny, small or base")
	seed := fs.Uint64("seed", 1, "initialisation seed (same seed, same weights)")
	out := fs.String("out", "", "checkpoint directory to write (required)")
	tied := fs.Bool("tie_embeddings", false, "share the token embedding with lm_head")
	force := fs.Bool("force", false, "write into a non-empty --out, removing the training-state files of a checkpoint there")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *out == "" {
		fmt.Fprintln(stderr, "mgrpo-node init: --out is required")
		return exitUsage
	}
	cfg, err := gpu.Preset(*preset)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: --preset: %v\n", err)
		return exitUsage
	}
	cfg.TieEmbeddings = *tied
	if err := prepareOut(*out, *force); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %v\n", err)
		return exitUsage
	}
	m, err := gpu.NewModel(cfg, *seed)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %v\n", err)
		return exitFailed
	}
	if err := gpu.SaveCheckpoint(*out, m, tokenizer.NewChar()); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s: preset %s, seed %d, %d parameters\n", *out, *preset, *seed, m.NumParams())
	return exitOK
}

// checkpointFiles are the files of a training checkpoint that describe
// its state, not a model: init --force removes them before writing a fresh
// model, so what remains is a model directory, never a checkpoint of step
// N holding random weights.
var checkpointFiles = []string{runlog.CompleteFile, runlog.ManifestFile, runlog.TrainerStateFile,
	optim.StateFileName, rewards.ControllerStateFile, guard.StateFile, runlog.ConfigFile}

// prepareOut refuses a non-empty out unless force; with force it removes
// the checkpointFiles and the behaviour/ weights there.
func prepareOut(out string, force bool) error {
	entries, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if !force {
		return fmt.Errorf("--out %s is not empty (it holds %s): choose an empty directory, or add --force to write a fresh model there", out, entries[0].Name())
	}
	for _, name := range append(checkpointFiles, actors.BehaviourDir) {
		if err := os.RemoveAll(filepath.Join(out, name)); err != nil {
			return fmt.Errorf("--out %s: %w", out, err)
		}
	}
	return nil
}

// parseSubFlags parses a subcommand's flags. On --help it prints the
// flags to stdout (exit 0); on a bad flag it prints one line naming it
// (exit 2). ok is true when the subcommand should go on.
func parseSubFlags(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintf(stdout, "Usage of %s:\n%s", fs.Name(), fs.FlagUsages())
		return exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return exitUsage, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return exitOK, true
}
