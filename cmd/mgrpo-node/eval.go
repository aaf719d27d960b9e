package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/internal/tokenizer/chat"
	"github.com/mgrpo/mgrpo/rewards/tasks"
	"github.com/spf13/pflag"
)

// evalArgs are the flags of `mgrpo-node eval`.
type evalArgs struct {
	checkpoint   string
	task         string
	dataset      string
	source       tasks.Source // fields and held-out split of dataset
	template     string       // task.prompt_template
	system       string       // task.system_prompt
	opts         evaluate.Options
	taskOpts     tasks.Options
	maxNewTokens int
	changed      map[string]bool // flags given on the command line
}

// evalOutput is the JSON object `mgrpo-node eval` prints: the checkpoint,
// its step (-1 when it has no trainer state) and the evaluation result.
type evalOutput struct {
	Checkpoint string `json:"checkpoint"`
	Step       int    `json:"step"`
	evaluate.Result
}

// runEval runs `mgrpo-node eval --checkpoint DIR --task NAME --n N --k K`:
// greedy accuracy, pass@k, mean@k, coverage and entropy per token of the
// checkpoint's policy on N held-out problems, printed as one JSON object.
// A checkpoint inside a run directory takes the task and its options from
// the run's config.yaml unless flags override them. Bad flags or an
// unusable checkpoint print one line and exit 2.
func runEval(args []string, stdout, stderr io.Writer) int {
	a, code := parseEvalArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	dir, step, err := resolveEvalCheckpoint(a.checkpoint)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: --checkpoint: %v\n", err)
		return exitUsage
	}
	if a, err = withRunDefaults(a, dir); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return exitUsage
	}
	task, err := evalTask(a)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return exitUsage
	}
	model, tok, err := loadPolicy(dir)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: --checkpoint: %v\n", err)
		return exitUsage
	}
	if tok.EOS() == 0 {
		fmt.Fprintf(stderr, "mgrpo-node eval: --checkpoint: the tokenizer's end-of-sequence id is 0, which generation cannot stop at yet\n")
		return exitUsage
	}
	prompter, err := chat.NewPrompter(tok, a.template, a.system)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: --prompt_template: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sampler := evaluate.ModelSampler{Model: model, Tokenizer: tok, Prompter: prompter, MaxNewTokens: a.maxNewTokens}
	res, err := evaluate.Run(ctx, sampler, task, a.opts)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return exitFailed
	}
	if res.N < a.opts.N {
		fmt.Fprintf(stderr, "mgrpo-node eval: the data set has %d problems, fewer than --n %d: each was evaluated once (n: %d)\n", res.N, a.opts.N, res.N)
	}
	out, err := json.Marshal(evalOutput{Checkpoint: dir, Step: step, Result: res})
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: encode result: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, string(out))
	return exitOK
}

// parseEvalArgs reads the flags. It returns code -1 to go on, or the exit
// code (help printed, or a bad flag reported on one line).
func parseEvalArgs(args []string, stdout, stderr io.Writer) (evalArgs, int) {
	var a evalArgs
	fs := pflag.NewFlagSet("mgrpo-node eval", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	help := fs.BoolP("help", "h", false, "show this help")
	fs.StringVar(&a.checkpoint, "checkpoint", "", "checkpoint directory, or a run directory (its newest complete checkpoint)")
	fs.StringVar(&a.task, "task", "addition", "task: "+strings.Join(tasks.Names(), "|")+"; a run's checkpoint defaults to the run's task")
	fs.StringVar(&a.dataset, "dataset", "", "data file (.jsonl or .parquet) verified by --task; its held-out rows when the run holds some out (\"\" = generate)")
	fs.StringVar(&a.source.Fields.Prompt, "prompt_field", "", "prompt column of --dataset (\"\" = prompt, question or problem)")
	fs.StringVar(&a.source.Fields.Answer, "answer_field", "", "answer column of --dataset (\"\" = answer or solution)")
	fs.StringVar(&a.template, "prompt_template", "", "\"\" (raw text), llama3, chatml or tokenizer (the checkpoint's chat_template)")
	fs.StringVar(&a.system, "system_prompt", "", "system message of --prompt_template")
	fs.IntVar(&a.opts.N, "n", 200, "number of evaluation problems")
	fs.IntVar(&a.opts.K, "k", 8, "samples per problem for pass@k, mean@k and coverage")
	fs.Float64Var(&a.opts.Temperature, "temperature", 1, fmt.Sprintf("sampling temperature of the k samples (at least %g)", config.MinTemperature))
	fs.Uint64Var(&a.opts.Seed, "seed", 1, "seed of the evaluation problems and samples")
	fs.IntVar(&a.opts.BatchSize, "batch", evaluate.DefaultBatchSize, "prompts per sampling call")
	fs.IntVar(&a.maxNewTokens, "max_new_tokens", 0, "cap on generated tokens (0 = the model's context)")
	fs.IntVar(&a.taskOpts.Digits, "digits", 0, "addition: digits per operand (0 = task default)")
	fs.IntVar(&a.taskOpts.Numbers, "numbers", 0, "countdown: numbers per prompt (0 = task default)")
	fs.IntVar(&a.taskOpts.MaxNumber, "max_number", 0, "countdown/wordproblems: largest number (0 = task default)")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return a, exitUsage
	}
	if *help {
		fmt.Fprintln(stdout, "usage: mgrpo-node eval --checkpoint DIR [--task NAME] [--n N] [--k K] [--temperature T] [--seed S]")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return a, exitOK
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "mgrpo-node eval: unexpected argument %q\n", fs.Arg(0))
		return a, exitUsage
	case a.checkpoint == "":
		fmt.Fprintln(stderr, "mgrpo-node eval: --checkpoint is required")
		return a, exitUsage
	}
	if err := checkEvalArgs(a); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return a, exitUsage
	}
	a.changed = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { a.changed[f.Name] = true })
	return a, -1
}

// checkEvalArgs names the first out-of-range numeric flag.
func checkEvalArgs(a evalArgs) error {
	checks := []struct {
		ok   bool
		flag string
		val  any
		want string
	}{
		{a.opts.N >= 1, "n", a.opts.N, "1 or more"},
		{a.opts.K >= 1, "k", a.opts.K, "1 or more"},
		{a.opts.BatchSize >= 1, "batch", a.opts.BatchSize, "1 or more"},
		{a.maxNewTokens >= 0, "max_new_tokens", a.maxNewTokens, "0 or more"},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("--%s = %v: must be %s", c.flag, c.val, c.want)
		}
	}
	return checkTemperature(a.opts.Temperature)
}

// runConfigOf is the configuration in the config.yaml of the run holding
// checkpoint dir (runs/<name>/checkpoints/step-N, or its reference/); nil
// for a checkpoint outside a run, or a run without one.
func runConfigOf(dir string) (*config.Config, error) {
	parent := filepath.Dir(dir)
	var run string
	switch {
	case filepath.Base(parent) == runlog.CheckpointsDir:
		run = filepath.Dir(parent)
	case filepath.Base(filepath.Clean(dir)) == runlog.ReferenceDir:
		run = parent
	default:
		return nil, nil
	}
	file := filepath.Join(run, runlog.ConfigFile)
	if _, err := os.Stat(file); err != nil {
		return nil, nil
	}
	cfg, err := config.Load(config.Sources{File: file})
	if err != nil {
		return nil, fmt.Errorf("run config: %w", err)
	}
	return cfg, nil
}

// withRunDefaults fills the task flags not given on the command line from
// the configuration of the run holding checkpoint dir (runConfigOf); other
// checkpoints keep the flag defaults.
func withRunDefaults(a evalArgs, dir string) (evalArgs, error) {
	cfg, err := runConfigOf(dir)
	if cfg == nil || err != nil {
		return a, err
	}
	set := func(flag string, dst *int, v int) {
		if !a.changed[flag] {
			*dst = v
		}
	}
	if !a.changed["task"] {
		a.task = cfg.Task.Name
	}
	if !a.changed["dataset"] && !a.changed["task"] {
		a.dataset = cfg.Task.Dataset
		a.source.EvalPath, a.source.EvalFraction, a.source.Seed = cfg.Task.EvalDataset, cfg.Task.EvalFraction, uint64(cfg.Task.Seed)
	}
	setText := func(flag string, dst *string, v string) {
		if !a.changed[flag] {
			*dst = v
		}
	}
	setText("prompt_field", &a.source.Fields.Prompt, cfg.Task.PromptField)
	setText("answer_field", &a.source.Fields.Answer, cfg.Task.AnswerField)
	setText("prompt_template", &a.template, cfg.Task.PromptTemplate)
	setText("system_prompt", &a.system, cfg.Task.SystemPrompt)
	set("digits", &a.taskOpts.Digits, cfg.Task.Digits)
	set("numbers", &a.taskOpts.Numbers, cfg.Task.Numbers)
	set("max_number", &a.taskOpts.MaxNumber, cfg.Task.MaxNumber)
	set("max_new_tokens", &a.maxNewTokens, cfg.Generation.MaxCompletionLen)
	return a, nil
}

// evalTask builds the task, or the data set it verifies: its held-out
// rows when the run held some out (task.eval_dataset, task.eval_fraction).
func evalTask(a evalArgs) (tasks.Task, error) {
	if a.dataset == "" {
		return tasks.New(a.task, a.taskOpts)
	}
	src := a.source
	src.Path = a.dataset
	train, held, err := tasks.OpenDatasets(src, a.task, a.taskOpts)
	if err != nil {
		return nil, err
	}
	if held != nil {
		return held, nil
	}
	return train, nil
}

// resolveEvalCheckpoint accepts a complete runlog checkpoint, a run or
// checkpoints directory (its newest complete checkpoint), or a model
// directory (config.json, model.safetensors, tokenizer.json: a run's
// sealed reference/, a Hugging Face checkpoint), and returns it with its
// trainer step (-1 when there is none). A path that does not exist is
// said so.
func resolveEvalCheckpoint(path string) (string, int, error) {
	if _, err := os.Stat(path); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := runlog.Resolve(path)
	if errors.Is(err, runlog.ErrNoCheckpoint) {
		if _, serr := os.Stat(filepath.Join(path, "config.json")); serr == nil {
			return path, -1, nil
		}
	}
	if err != nil {
		return "", 0, err
	}
	if _, err := os.Stat(filepath.Join(dir, runlog.TrainerStateFile)); errors.Is(err, os.ErrNotExist) {
		return dir, -1, nil // a sealed model without training state: a run's reference/
	}
	st, err := runlog.LoadTrainerState(dir)
	if err != nil {
		return "", 0, err
	}
	return dir, st.Step, nil
}

// loadPolicy loads the model and tokenizer of a checkpoint directory: from
// the directory itself (a runlog checkpoint holds gpu.SaveCheckpoint's
// files directly) or else from its model/ sub-directory.
func loadPolicy(dir string) (*gpu.Model, tokenizer.Tokenizer, error) {
	modelDir := dir
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, "model", "config.json")); err2 == nil {
			modelDir = filepath.Join(dir, "model")
		}
	}
	return gpu.LoadCheckpoint(modelDir)
}
