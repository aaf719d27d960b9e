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
// [--temperature T]`. Each input line is {"prompt": "...", "completion":
// "..."} (text: the prompt gets the tokenizer's special tokens (BOS in
// front for Llama and the built-in tokenizer), the completion is scored as
// written, add the EOS token yourself with ids) or {"prompt_ids": [...],
// "completion_ids": [...]} (used as given); each output line holds the
// per-token log-probs and entropies of the completion.
func runScore(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node score", pflag.ContinueOnError)
	ckpt := fs.String("checkpoint", "", "checkpoint directory (required)")
	input := fs.String("input", "", "JSONL file of prompt/completion pairs (required; - for stdin)")
	temp := fs.Float64("temperature", 1, fmt.Sprintf("divide the logits by this before the softmax (at least %g)", config.MinTemperature))
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	switch {
	case *ckpt == "" || *input == "":
		fmt.Fprintln(stderr, "mgrpo-node score: --checkpoint and --input are required")
		return exitUsage
	}
	if err := checkTemperature(*temp); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitUsage
	}
	m, err := gpu.LoadModel(*ckpt)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitUsage
	}
	tok := lazyTokenizer(*ckpt, m.Config())
	seqs, lines, err := readScoreInput(*input, m.Config(), tok)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitUsage
	}
	scores, err := m.Score(seqs, *temp)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitFailed
	}
	if err := checkFiniteScores(scores, lines); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitFailed
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for i, s := range scores {
		o := scoreOutput{Line: lines[i], CompletionIDs: seqs[i].Completion, LogProbs: s.LogProbs, Entropies: s.Entropies}
		for _, lp := range s.LogProbs {
			o.SumLogProb += lp
		}
		if err := enc.Encode(o); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
			return exitFailed
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node score: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// lazyTokenizer returns the checkpoint's tokenizer, loaded on the first
// call: scoring token ids needs none, so a checkpoint whose tokenizer
// cannot be read still scores them.
func lazyTokenizer(dir string, cfg gpu.Config) func() (tokenizer.Tokenizer, error) {
	var (
		tok  tokenizer.Tokenizer
		err  error
		done bool
	)
	return func() (tokenizer.Tokenizer, error) {
		if !done {
			tok, err = gpu.LoadTokenizer(dir, cfg)
			done = true
		}
		return tok, err
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
func readScoreInput(path string, cfg gpu.Config, tok func() (tokenizer.Tokenizer, error)) ([]gpu.Sequence, []int, error) {
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
func parseScoreLine(text []byte, cfg gpu.Config, tokenizerOf func() (tokenizer.Tokenizer, error)) (gpu.Sequence, error) {
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
		tok, err := tokenizerOf()
		if err != nil {
			return s, fmt.Errorf("text needs the checkpoint's tokenizer (or give prompt_ids and completion_ids): %w", err)
		}
		p, err := tok.EncodePrompt(*in.Prompt)
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
