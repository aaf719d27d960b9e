package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/atomicfile"
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
	out          string          // --out: the result file ("" = stdout)
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
// checkpoint's policy on N held-out problems, printed as one JSON object
// (or written to --out). A checkpoint inside a run directory takes the
// task and its options from the run's config.yaml unless flags override
// them. Bad flags, an unusable checkpoint or an evaluation too large for
// memory print one line and exit 2; a result that cannot be written, 1;
// an interrupt stops it at once with one line and nothing written, 3.
func runEval(args []string, stdout, stderr io.Writer) int {
	return evalMain(args, stdout, stderr, os.Exit)
}

// evalMain is runEval with the exit a second interrupt calls.
func evalMain(args []string, stdout, stderr io.Writer, exit func(code int)) int {
	a, code := parseEvalArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible(stderr, exit, "", evalInterruptedAgain)
	defer stop()
	job, code := prepareEval(a, stderr)
	if code >= 0 {
		return code
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "mgrpo-node eval: interrupted before sampling; nothing written")
		return exitStopped
	}
	res, code := sampleEval(ctx, job, stderr)
	if code >= 0 {
		return code
	}
	return writeEval(a.out, evalOutput{Checkpoint: job.dir, Step: job.step, Result: res}, stdout, stderr)
}

// evalJob is an evaluation ready to sample: its flags, checkpoint, step,
// task and sampler.
type evalJob struct {
	a       evalArgs
	dir     string
	step    int
	task    tasks.Task
	sampler evaluate.ModelSampler
}

// prepareEval resolves the checkpoint, the run's defaults and the task,
// refuses an evaluation too large for memory and a --out that cannot be
// written, and loads the policy. It returns code -1 to go on, or the exit
// code after one line on stderr.
func prepareEval(a evalArgs, stderr io.Writer) (evalJob, int) {
	fail := func(code int, format string, v ...any) (evalJob, int) {
		fmt.Fprintf(stderr, "mgrpo-node eval: "+format+"\n", v...)
		return evalJob{}, code
	}
	dir, step, err := resolveEvalCheckpoint(a.checkpoint)
	if err != nil {
		return fail(exitUsage, "--checkpoint: %v", err)
	}
	if a, err = withRunDefaults(a, dir); err != nil {
		return fail(exitUsage, "%v", err)
	}
	task, err := evalTask(a)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if err := checkEvalSize(task, a, gpu.ReadMemory()); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if err := checkWritable(a.out); err != nil {
		return fail(exitFailed, "--out %s: %v", a.out, err)
	}
	model, tok, err := loadPolicy(dir)
	if err != nil {
		return fail(exitUsage, "--checkpoint: %v", err)
	}
	if tok.EOS() == 0 {
		return fail(exitUsage, "--checkpoint: the tokenizer's end-of-sequence id is 0, which generation cannot stop at yet")
	}
	prompter, err := chat.NewPrompter(tok, a.template, a.system)
	if err != nil {
		return fail(exitUsage, "--prompt_template: %v", err)
	}
	sampler := evaluate.ModelSampler{Model: model, Tokenizer: tok, Prompter: prompter, MaxNewTokens: a.maxNewTokens}
	return evalJob{a: a, dir: dir, step: step, task: task, sampler: sampler}, -1
}

// sampleEval says what it evaluates and runs the evaluation. It returns
// code -1 and the result, or the exit code after one line: 3 when ctx was
// cancelled (an interrupt), even if the evaluation had finished; 2 when a
// sampling call would not fit in memory (--k or --batch too large).
func sampleEval(ctx context.Context, job evalJob, stderr io.Writer) (evaluate.Result, int) {
	a := job.a
	n := evalProblems(job.task, a.opts.N)
	fmt.Fprintf(stderr, "evaluating %s on %d %s problems (greedy, then --k %d samples each)\n", job.dir, n, job.task.Name(), a.opts.K)
	var done int
	res, err := evaluate.Run(ctx, evalSampler{ModelSampler: job.sampler, done: &done}, job.task, a.opts)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "mgrpo-node eval: interrupted after sampling %d of %d prompts (%d problems, greedy then --k %d); nothing written\n",
			done, 2*n, n, a.opts.K)
		return res, exitStopped
	case errors.Is(err, gpu.ErrMemory):
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return res, exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return res, exitFailed
	}
	if res.N < a.opts.N {
		fmt.Fprintf(stderr, "mgrpo-node eval: the data set has %d problems, fewer than --n %d: each was evaluated once (n: %d)\n", res.N, a.opts.N, res.N)
	}
	return res, -1
}

// writeEval prints the result as one JSON line on stdout or, with --out,
// writes it to that file (beside it first, then renamed in: a failed
// write leaves no part of it, and an older file whole) and says so on
// stdout. A write that fails prints one line and returns exitFailed.
func writeEval(path string, out evalOutput, stdout, stderr io.Writer) int {
	line, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: encode result: %v\n", err)
		return exitFailed
	}
	line = append(line, '\n')
	if path == "" {
		if _, err := stdout.Write(line); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node eval: write the result to stdout: %v\n", unwrapPathError(err))
			return exitFailed
		}
		return exitOK
	}
	if err := atomicfile.WriteBytes(path, line); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: --out %s: %v; nothing written\n", path, unwrapPathError(err))
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return exitOK
}

// unwrapPathError is the cause of a *os.PathError ("no space left on
// device"), or err.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkWritable refuses, before the evaluation, a --out whose directory
// does not take a new file (missing, not a directory, read-only): it
// creates and removes an empty file there, as atomicfile will. "" (stdout)
// passes.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".probe*")
	if err != nil {
		return fmt.Errorf("cannot create a file in %s: %w", dir, unwrapPathError(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// evalSampler is the evaluation's sampler: it counts the prompts sampled
// and returns as soon as ctx is cancelled (an interrupt), leaving the
// sampling call in flight to the process's exit, which ends it; eval
// writes nothing then, so nothing waits for it.
type evalSampler struct {
	evaluate.ModelSampler
	done *int // prompts sampled so far
}

// Sample implements evaluate.Sampler.
func (s evalSampler) Sample(ctx context.Context, prompts []string, n int, temperature float64, seed uint64) ([]evaluate.Completion, error) {
	type result struct {
		got []evaluate.Completion
		err error
	}
	ch := make(chan result, 1)
	go func() {
		got, err := s.ModelSampler.Sample(ctx, prompts, n, temperature, seed)
		ch <- result{got, err}
	}()
	select {
	case r := <-ch:
		if r.err == nil {
			*s.done += len(prompts)
		}
		return r.got, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// evalInterruptedAgain is eval's line for a second signal; the first
// one prints nothing there: eval says how far it got as it returns.
const evalInterruptedAgain = "mgrpo-node eval: interrupted again: exiting now; nothing written"

// evalCompletionBytes is the memory of one completion while evaluate.Run
// holds it, a Completion and a short text: the figure evaluate's own
// check counts, a lower bound for long completions.
const evalCompletionBytes = 64

// evalProblems is how many problems an evaluation of n draws from task:
// n, or every row of a data set with fewer (evaluate.Problems).
func evalProblems(task tasks.Task, n int) int {
	if d, ok := task.(evaluate.Finite); ok {
		return min(n, d.Len())
	}
	return n
}

// checkEvalSize refuses, before a problem is drawn, an evaluation whose
// problems and their completions (a greedy one and --k samples each)
// need more memory than mem has available, naming the largest --n that
// could fit, or --k when not one problem fits. The estimate is a lower
// bound (one problem drawn to size them, evalCompletionBytes a
// completion). A machine whose memory cannot be read refuses only what
// no machine holds (2^62 bytes).
func checkEvalSize(task tasks.Task, a evalArgs, mem gpu.MemoryReading) error {
	n := evalProblems(task, a.opts.N)
	sample := evaluate.Problems(task, 1, a.opts.Seed)
	if len(sample) == 0 {
		return nil
	}
	p := sample[0]
	completions := 1 + float64(a.opts.K)
	per := float64(unsafe.Sizeof(p)+unsafe.Sizeof("")+uintptr(len(p.Prompt)+len(p.Answer))) + completions*evalCompletionBytes
	need := float64(n) * per
	avail, where := float64(mem.Available()), "this machine has"
	if !mem.Known {
		avail, where = 1<<62, "no machine has"
	}
	if need <= avail {
		return nil
	}
	if fits := math.Floor(avail / per); fits >= 1 {
		return fmt.Errorf("--n %d: %d problems with %.0f completions each (greedy and --k %d) need at least %s; %s %s available (--n %.0f is the most that could fit)",
			a.opts.N, n, completions, a.opts.K, formatEvalGB(need), where, formatEvalGB(avail), fits)
	}
	return fmt.Errorf("--k %d: one problem's %.0f completions need at least %s; %s %s available", a.opts.K, completions, formatEvalGB(per), where, formatEvalGB(avail))
}

// formatEvalGB writes a byte count in GB (10^9): one decimal below
// 100 GB, whole GB up to 10^6 GB, then in scientific notation.
func formatEvalGB(b float64) string {
	switch gb := b / 1e9; {
	case gb < 100:
		return fmt.Sprintf("%.1f GB", gb)
	case gb < 1e6:
		return fmt.Sprintf("%.0f GB", gb)
	default:
		return fmt.Sprintf("%.1e GB", gb)
	}
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
	fs.StringVar(&a.out, "out", "", "write the JSON result to this file instead of stdout (beside it first, then renamed in)")
	fs.IntVar(&a.taskOpts.Digits, "digits", 0, "addition: digits per operand (0 = task default)")
	fs.IntVar(&a.taskOpts.Numbers, "numbers", 0, "countdown: numbers per prompt (0 = task default)")
	fs.IntVar(&a.taskOpts.MaxNumber, "max_number", 0, "countdown/wordproblems: largest number (0 = task default)")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node eval: %v\n", err)
		return a, exitUsage
	}
	if *help {
		fmt.Fprintln(stdout, "usage: mgrpo-node eval --checkpoint DIR [--task NAME] [--n N] [--k K] [--temperature T] [--seed S] [--out FILE]")
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
