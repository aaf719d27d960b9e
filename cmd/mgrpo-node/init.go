package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/optim"
	"github.com/mgrpo/mgrpo/internal/atomicfile"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/spf13/pflag"
)

// runInit runs `mgrpo-node init --out DIR`: it writes a freshly
// initialised Hugging Face checkpoint (config.json with the model_type and
// architectures of --arch, model.safetensors, the tokenizer files) of a
// preset's shape, changed by the shape flags, for the built-in character
// tokenizer or, with --tokenizer, for a Hugging Face tokenizer: its
// vocabulary, special tokens (BOS, EOS and PAD in config.json) and chat
// template, its files copied. DIR must be empty or missing: over a
// training checkpoint it would leave the optimiser, trainer state and
// COMPLETE marker beside random weights. --force writes anyway, leaving
// out the files that would describe another model (checkpointFiles,
// tokenizerFiles, behaviour/). The model is written into a directory
// beside DIR and renamed into place when complete
// (atomicfile.ReplaceDir): a failed or killed init leaves DIR as it was.
func runInit(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseInitArgs(args, stdout, stderr)
	if !ok {
		return code
	}
	cfg, tok, err := initModel(a)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %v\n", err)
		return exitUsage
	}
	if err := checkOut(a.out, a.force); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %v\n", err)
		return exitUsage
	}
	m, err := gpu.NewModel(cfg, a.seed)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %v\n", err)
		return exitFailed
	}
	save := func(tmp string) error { return gpu.SaveCheckpoint(tmp, m, tok) }
	if err := atomicfile.ReplaceDir(a.out, keepOnForce, save); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node init: %s\n", errorLine(err))
		return replaceExit(err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, seed %d, %d parameters\n", a.out, describeInit(a, cfg, tok), a.seed, m.NumParams())
	return exitOK
}

// initArgs are the flags of `mgrpo-node init`.
type initArgs struct {
	preset, arch, tokenizer, out string
	seed                         uint64
	shape                        initShape
	vocab                        int
	tied, force                  bool
}

// initShape are init's shape flags; 0 keeps the preset's value
// (kv_heads 0: heads; head_dim 0: hidden/heads).
type initShape struct {
	hidden, layers, heads, kvHeads, mlp, context, headDim int
	ropeTheta                                             float64
}

// parseInitArgs reads init's flags; ok is false when init should stop
// with code (help printed, or a bad flag said on one line).
func parseInitArgs(args []string, stdout, stderr io.Writer) (a initArgs, code int, ok bool) {
	fs := pflag.NewFlagSet("mgrpo-node init", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&a.out, "out", "", "checkpoint directory to write (required)")
	fs.StringVar(&a.tokenizer, "tokenizer", "", "directory of a Hugging Face tokenizer.json (and tokenizer_config.json: special tokens, chat template), copied into --out (\"\" = the built-in character tokenizer)")
	fs.StringVar(&a.preset, "preset", "small", "shape to start from: tiny, small, base (qwen2-/qwen3- before one: that family), smollm2-135m or qwen2.5-0.5b (the shape flags change it)")
	fs.StringVar(&a.arch, "arch", "", "decoder family: llama, qwen2 (q/k/v biases), qwen3 (q/k norms) or mistral (llama's maths, saved as mistral) (\"\" = the preset's: llama, or its qwen2-/qwen3- prefix)")
	fs.IntVar(&a.shape.hidden, "hidden", 0, "hidden size (0 = the preset's)")
	fs.IntVar(&a.shape.layers, "layers", 0, "decoder layers (0 = the preset's)")
	fs.IntVar(&a.shape.heads, "heads", 0, "attention heads (0 = the preset's)")
	fs.IntVar(&a.shape.kvHeads, "kv_heads", 0, "key/value heads (0 = heads)")
	fs.IntVar(&a.shape.mlp, "mlp", 0, "MLP inner size (0 = the preset's)")
	fs.IntVar(&a.shape.context, "context", 0, fmt.Sprintf("context length in tokens (0 = the preset's: %d, 2048 for smollm2-135m and qwen2.5-0.5b)", gpu.PresetContext))
	fs.IntVar(&a.shape.headDim, "head_dim", 0, "width of each attention head, as Qwen3's head_dim (0 = hidden/heads)")
	fs.Float64Var(&a.shape.ropeTheta, "rope_theta", 0, "RoPE base frequency (0 = the preset's: 10000, 1e5 for smollm2-135m, 1e6 for qwen2.5-0.5b)")
	fs.IntVar(&a.vocab, "vocab", 0, "vocabulary size, at least the tokenizer's ids (0 = the tokenizer's; hub models pad it, Qwen's to 151936)")
	fs.BoolVar(&a.tied, "tie_embeddings", false, "share the token embedding with lm_head")
	fs.Uint64Var(&a.seed, "seed", 1, "initialisation seed (same seed, same weights)")
	fs.BoolVar(&a.force, "force", false, "write into a non-empty --out, removing the training-state and tokenizer files there")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return a, code, false
	}
	if a.out == "" {
		fmt.Fprintln(stderr, "mgrpo-node init: --out is required")
		return a, exitUsage, false
	}
	return a, exitOK, true
}

// initModel resolves init's model: the preset's shape with the shape
// flags over it, the family of --arch, and the vocabulary of the
// tokenizer (the built-in one, or --tokenizer's, padded to --vocab).
func initModel(a initArgs) (gpu.Config, tokenizer.Tokenizer, error) {
	cfg, err := gpu.Preset(a.preset)
	if err != nil {
		return cfg, nil, fmt.Errorf("--preset: %w", err)
	}
	if a.arch != "" {
		if cfg.Arch, err = initArch(a.arch); err != nil {
			return cfg, nil, err
		}
	}
	a.shape.apply(&cfg)
	cfg.TieEmbeddings = a.tied
	tok, err := initTokenizer(a.tokenizer)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Vocab = tok.VocabSize()
	switch {
	case a.vocab < 0 || (a.vocab > 0 && a.vocab < tok.VocabSize()):
		return cfg, nil, fmt.Errorf("--vocab %d: must be 0 (the tokenizer's) or at least the tokenizer's %d ids", a.vocab, tok.VocabSize())
	case a.vocab > 0:
		cfg.Vocab = a.vocab
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("the shape flags: %w", err)
	}
	return cfg, tok, nil
}

// initArch maps --arch to gpu.Config.Arch ("" for Llama, as a Llama
// checkpoint loads).
func initArch(arch string) (string, error) {
	switch arch {
	case gpu.ArchLlama:
		return "", nil
	case gpu.ArchQwen2, gpu.ArchQwen3, gpu.ArchMistral:
		return arch, nil
	}
	return "", fmt.Errorf("--arch %q: want %s, %s, %s or %s", arch, gpu.ArchLlama, gpu.ArchQwen2, gpu.ArchQwen3, gpu.ArchMistral)
}

// apply sets the non-zero shape flags on c; kv_heads follows heads when
// only heads is given.
func (s initShape) apply(c *gpu.Config) {
	for _, o := range []struct {
		dst *int
		v   int
	}{{&c.Hidden, s.hidden}, {&c.Layers, s.layers}, {&c.Heads, s.heads}, {&c.KVHeads, s.kvHeads}, {&c.MLP, s.mlp}, {&c.Context, s.context}, {&c.HeadWidth, s.headDim}} {
		if o.v != 0 {
			*o.dst = o.v
		}
	}
	if s.heads != 0 && s.kvHeads == 0 {
		c.KVHeads = c.Heads
	}
	if s.ropeTheta != 0 {
		c.RopeTheta = s.ropeTheta
	}
}

// initTokenizer loads --tokenizer: a directory holding tokenizer.json (or
// the file itself), read with the files beside it; "" is the built-in
// character tokenizer.
func initTokenizer(path string) (tokenizer.Tokenizer, error) {
	if path == "" {
		return tokenizer.NewChar(), nil
	}
	if filepath.Base(path) == tokenizer.FileName {
		path = filepath.Dir(path)
	}
	if _, err := os.Stat(filepath.Join(path, tokenizer.FileName)); err != nil {
		return nil, fmt.Errorf("--tokenizer %s: no %s there", path, tokenizer.FileName)
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer %s: %w", path, err)
	}
	return tok, nil
}

// describeInit says what init wrote: the family and shape, and the
// tokenizer with its special tokens.
func describeInit(a initArgs, c gpu.Config, tok tokenizer.Tokenizer) string {
	arch := c.Arch
	if arch == "" {
		arch = gpu.ArchLlama
	}
	shape := fmt.Sprintf("%s, hidden %d, %d layers, %d heads (%d kv, width %d), mlp %d, context %d, vocabulary %d",
		arch, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.HeadDim(), c.MLP, c.Context, c.Vocab)
	if a.tokenizer == "" {
		return fmt.Sprintf("preset %s (%s)", a.preset, shape)
	}
	special := func(id int) string {
		if id < 0 {
			return "none"
		}
		return strconv.Itoa(id)
	}
	return fmt.Sprintf("%s; the tokenizer of %s (%d ids; BOS %s, EOS %s, PAD %s)", shape, a.tokenizer, tok.VocabSize(),
		special(tok.BOS()), special(tok.EOS()), special(tok.PAD()))
}

// checkpointFiles are the files of a training checkpoint that describe
// its state, not a model: init --force removes them before writing a fresh
// model, so what remains is a model directory, never a checkpoint of step
// N holding random weights.
var checkpointFiles = []string{runlog.CompleteFile, runlog.ManifestFile, runlog.TrainerStateFile,
	optim.StateFileName, rewards.ControllerStateFile, guard.StateFile, runlog.ConfigFile}

// tokenizerFiles are the files beside tokenizer.json that describe a
// tokenizer (special tokens, chat template): init --force removes them, so
// that those of an earlier tokenizer do not stay beside a new one.
var tokenizerFiles = []string{tokenizer.TokenizerConfigFile, tokenizer.SpecialTokensMapFile,
	tokenizer.GenerationConfigFile, tokenizer.ChatTemplateFile}

// checkOut refuses a non-empty out unless force.
func checkOut(out string, force bool) error {
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return fmt.Errorf("--out %s is a file, not a directory", out)
	}
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
	return nil
}

// replaceExit is the exit code of a failed atomicfile.ReplaceDir of
// --out: exitUsage for an --out that holds the working directory,
// exitFailed for a failed write.
func replaceExit(err error) int {
	if errors.Is(err, atomicfile.ErrWorkingDir) {
		return exitUsage
	}
	return exitFailed
}

// keepOnForce reports whether init --force keeps an entry of the old
// --out: all but the checkpointFiles, tokenizerFiles and behaviour/
// (the files the new model writes replace their old ones).
func keepOnForce(name string) bool {
	return name != actors.BehaviourDir && !slices.Contains(checkpointFiles, name) && !slices.Contains(tokenizerFiles, name)
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
