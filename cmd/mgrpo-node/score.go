package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/internal/tokenizer/chat"
	"github.com/spf13/pflag"
)

// scoreInput is one line of `mgrpo-node score --input`: text, or token ids.
type scoreInput struct {
	Prompt        *string `json:"prompt"`
	Completion    *string `json:"completion"`
	PromptIDs     []int   `json:"prompt_ids"`
	CompletionIDs []int   `json:"completion_ids"`
}

// scoreOutput is one output line: the completion's token ids with their
// log-probs and next-token entropies at the scoring temperature.
type scoreOutput struct {
	Line          int       `json:"line"`
	CompletionIDs []int     `json:"completion_ids"`
	LogProbs      []float64 `json:"logprobs"`
	Entropies     []float64 `json:"entropies"`
	SumLogProb    float64   `json:"sum_logprob"`
}

// runScore runs `mgrpo-node score --checkpoint DIR --input FILE.jsonl
// [--temperature T] [--prompt_template NAME --system_prompt TEXT]`. DIR
// is a checkpoint, a run directory (its newest complete checkpoint) or a
// model directory. Each input line is {"prompt": "...", "completion":
// "..."} (text: the prompt is encoded as the policy reads it, through the
// prompt template, which for a checkpoint of a run is the run's
// task.prompt_template and task.system_prompt, so that a run's
// checkpoint scores the text training saw; without one it gets the
// tokenizer's special tokens, BOS in front for Llama and the built-in
// tokenizer; the completion is scored as written, add the EOS token
// yourself with ids) or {"prompt_ids": [...], "completion_ids": [...]}
// (used as given); each output line holds the per-token log-probs and
// entropies of the completion.
func runScore(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseScoreArgs(args, stdout, stderr)
	if !ok {
		return code
	}
	m, enc, err := loadScorer(&a)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitUsage
	}
	seqs, lines, err := readScoreInput(a.input, m.Config(), enc)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitUsage
	}
	scores, err := m.Score(seqs, a.temperature)
	if err == nil {
		err = checkFiniteScores(scores, lines)
	}
	if err == nil {
		err = writeScores(stdout, seqs, lines, scores)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// scoreArgs are the flags of `mgrpo-node score`.
type scoreArgs struct {
	checkpoint, input string
	temperature       float64
	template, system  string          // task.prompt_template and task.system_prompt
	changed           map[string]bool // flags given on the command line
}

// parseScoreArgs reads score's flags; ok is false when score should stop
// with code (help printed, or a bad flag said on one line).
func parseScoreArgs(args []string, stdout, stderr io.Writer) (a scoreArgs, code int, ok bool) {
	fs := pflag.NewFlagSet("mgrpo-node score", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&a.checkpoint, "checkpoint", "", "checkpoint directory, or a run directory (its newest complete checkpoint) (required)")
	fs.StringVar(&a.input, "input", "", "JSONL file of prompt/completion pairs (required; - for stdin)")
	fs.Float64Var(&a.temperature, "temperature", 1, fmt.Sprintf("divide the logits by this before the softmax (at least %g)", config.MinTemperature))
	fs.StringVar(&a.template, "prompt_template", "", "how a text prompt is wrapped: \"\" (raw text), llama3, chatml or tokenizer (the checkpoint's chat_template); a run's checkpoint defaults to the run's task.prompt_template")
	fs.StringVar(&a.system, "system_prompt", "", "system message of --prompt_template (a run's checkpoint: the run's task.system_prompt)")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return a, code, false
	}
	if a.checkpoint == "" || a.input == "" {
		fmt.Fprintln(stderr, "mgrpo-node score: --checkpoint and --input are required")
		return a, exitUsage, false
	}
	if err := checkTemperature(a.temperature); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return a, exitUsage, false
	}
	a.changed = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { a.changed[f.Name] = true })
	return a, exitOK, true
}

// loadScorer resolves --checkpoint, takes the prompt template of its run
// unless the flags give one, and loads the model and, lazily, the text
// encoder.
func loadScorer(a *scoreArgs) (*gpu.Model, textEncoder, error) {
	dir, _, err := resolveEvalCheckpoint(a.checkpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("--checkpoint: %w", err)
	}
	cfg, err := runConfigOf(dir)
	if err != nil {
		return nil, nil, err
	}
	if cfg != nil && !a.changed["prompt_template"] && !a.changed["system_prompt"] {
		a.template, a.system = cfg.Task.PromptTemplate, cfg.Task.SystemPrompt
	}
	m, err := gpu.LoadModel(dir)
	if err != nil {
		return nil, nil, err
	}
	return m, lazyEncoder(dir, m.Config(), a.template, a.system), nil
}

// writeScores writes one output line per scored sequence.
func writeScores(stdout io.Writer, seqs []gpu.Sequence, lines []int, scores []gpu.TokenScores) error {
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for i, s := range scores {
		o := scoreOutput{Line: lines[i], CompletionIDs: seqs[i].Completion, LogProbs: s.LogProbs, Entropies: s.Entropies}
		for _, lp := range s.LogProbs {
			o.SumLogProb += lp
		}
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return w.Flush()
}

// textEncoder returns what encodes text input: the prompt template over
// the checkpoint's tokenizer (the prompt), and the tokenizer (the
// completion).
type textEncoder func() (*chat.Prompter, tokenizer.Tokenizer, error)

// lazyEncoder returns the text encoder of the checkpoint in dir with the
// prompt template and system prompt, loaded on the first call: scoring
// token ids needs none, so a checkpoint whose tokenizer cannot be read
// still scores them.
func lazyEncoder(dir string, cfg gpu.Config, template, system string) textEncoder {
	var (
		prompter *chat.Prompter
		tok      tokenizer.Tokenizer
		err      error
		done     bool
	)
	return func() (*chat.Prompter, tokenizer.Tokenizer, error) {
		if !done {
			done = true
			if tok, err = gpu.LoadTokenizer(dir, cfg); err != nil {
				return nil, nil, err
			}
			if prompter, err = chat.NewPrompter(tok, template, system); err != nil {
				err = fmt.Errorf("--prompt_template: %w", err)
			}
		}
		return prompter, tok, err
	}
}

// checkTemperature refuses a scoring (or sampling) temperature that is not
// a finite number of at least config.MinTemperature: logits divided by a
// smaller one overflow float32 and every log-prob comes out NaN.
func checkTemperature(t float64) error {
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0):
		return fmt.Errorf("--temperature %g: must be a finite number of at least %g", t, config.MinTemperature)
	case t < config.MinTemperature:
		return fmt.Errorf("--temperature %g: must be a finite number of at least %g (smaller temperatures overflow the float32 logits)", t, config.MinTemperature)
	}
	return nil
}

// checkFiniteScores names the first input line whose log-probs, entropies
// or their sum are not finite (a checkpoint with NaN or huge weights).
func checkFiniteScores(scores []gpu.TokenScores, lines []int) error {
	for i, s := range scores {
		sum := 0.0
		ok := true
		for j := range s.LogProbs {
			sum += s.LogProbs[j]
			ok = ok && finite(s.LogProbs[j])
		}
		for _, h := range s.Entropies {
			ok = ok && finite(h)
		}
		if !ok || !finite(sum) {
			return fmt.Errorf("line %d: log-prob/entropy is not finite (are the checkpoint's weights finite?)", lines[i])
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// readScoreInput parses the JSONL input into sequences, with the 1-based
// line number of each; the first bad line gives an error "FILE:LINE: ...".
func readScoreInput(path string, cfg gpu.Config, tok textEncoder) ([]gpu.Sequence, []int, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		r = f
	}
	var seqs []gpu.Sequence
	var lines []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		s, err := parseScoreLine(text, cfg, tok)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		seqs, lines = append(seqs, s), append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return seqs, lines, nil
}

// parseScoreLine turns one JSON line into a checked sequence.
func parseScoreLine(text []byte, cfg gpu.Config, encoderOf textEncoder) (gpu.Sequence, error) {
	var in scoreInput
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return gpu.Sequence{}, fmt.Errorf("not a JSON object with prompt/completion or prompt_ids/completion_ids: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return gpu.Sequence{}, fmt.Errorf("more than one JSON value on the line (one object per line)")
	}
	var s gpu.Sequence
	switch {
	case in.Prompt != nil && in.Completion != nil && in.PromptIDs == nil && in.CompletionIDs == nil:
		prompter, tok, err := encoderOf()
		if err != nil {
			return s, fmt.Errorf("text needs the checkpoint's tokenizer (or give prompt_ids and completion_ids): %w", err)
		}
		p, err := prompter.Encode(*in.Prompt)
		if err != nil {
			return s, fmt.Errorf("prompt: %w", err)
		}
		c, err := tok.Encode(*in.Completion)
		if err != nil {
			return s, fmt.Errorf("completion: %w", err)
		}
		s = gpu.Sequence{Prompt: p, Completion: c}
	case in.Prompt == nil && in.Completion == nil && in.PromptIDs != nil && in.CompletionIDs != nil:
		s = gpu.Sequence{Prompt: in.PromptIDs, Completion: in.CompletionIDs}
	default:
		return s, fmt.Errorf("want either \"prompt\" and \"completion\" or \"prompt_ids\" and \"completion_ids\"")
	}
	switch {
	case len(s.Prompt) == 0:
		field := "prompt"
		if in.PromptIDs != nil {
			field = "prompt_ids"
		}
		return s, fmt.Errorf("empty %s (the model needs at least one prompt token, usually BOS)", field)
	case len(s.Prompt)+len(s.Completion) > cfg.Context:
		return s, fmt.Errorf("%d tokens exceed the model's context of %d", len(s.Prompt)+len(s.Completion), cfg.Context)
	}
	for _, id := range append(append([]int(nil), s.Prompt...), s.Completion...) {
		if id < 0 || id >= cfg.Vocab {
			return s, fmt.Errorf("token id %d outside the vocabulary [0, %d)", id, cfg.Vocab)
		}
	}
	return s, nil
}
