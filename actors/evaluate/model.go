package evaluate

import (
	"context"
	"fmt"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// ModelSampler is the Sampler of a gpu.Model: prompts are encoded by
// Prompter or with Tokenizer's special tokens (BOS in front), completions end at EOS (which is not part
// of Text), and the entropies of the sampled completions are computed
// exactly by scoring them at the sampling temperature (greedy completions
// get no entropy).
type ModelSampler struct {
	Model     *gpu.Model
	Tokenizer tokenizer.Tokenizer
	// Prompter, if set, encodes the prompts (a chat template); nil
	// encodes them with Tokenizer.EncodePrompt.
	Prompter interface {
		Encode(prompt string) ([]int, error)
	}
	// MaxNewTokens caps each completion; 0 means the model's context (the
	// model caps prompt plus completion at its context either way).
	MaxNewTokens int
}

var _ Sampler = ModelSampler{}
var _ MemoryChecker = ModelSampler{}

// CheckMemory implements MemoryChecker: it refuses when sampling n
// completions of each prompt, and scoring them, would need more memory
// than the machine has available (gpu.Config.SampleBytes, ScoreBytes).
func (s ModelSampler) CheckMemory(prompts []string, n int) error {
	promptLen := 1
	for _, p := range prompts {
		ids, err := s.encode(p)
		if err == nil {
			promptLen = max(promptLen, len(ids))
		}
	}
	c := s.Model.Config()
	maxNew := s.MaxNewTokens
	if maxNew <= 0 {
		maxNew = c.Context
	}
	maxNew = max(min(maxNew, c.Context-promptLen), 1)
	need := float64(c.SampleBytes(len(prompts), n, promptLen, maxNew)) +
		float64(c.ScoreBytes(len(prompts)*n, min(promptLen+maxNew, c.Context)))
	what := fmt.Sprintf("sampling %d prompts × %d completions", len(prompts), n)
	return gpu.CheckMemory(what, int64(min(need, 1<<62)))
}

// encode returns the ids of a prompt as the policy reads it.
func (s ModelSampler) encode(prompt string) ([]int, error) {
	if s.Prompter != nil {
		return s.Prompter.Encode(prompt)
	}
	return s.Tokenizer.EncodePrompt(prompt)
}

// Sample implements Sampler.
func (s ModelSampler) Sample(ctx context.Context, prompts []string, n int, temperature float64, seed uint64) ([]Completion, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids := make([][]int, len(prompts))
	for i, p := range prompts {
		enc, err := s.encode(p)
		if err != nil {
			return nil, fmt.Errorf("encode prompt %d %q: %w", i, p, err)
		}
		ids[i] = enc
	}
	maxNew := s.MaxNewTokens
	if maxNew <= 0 {
		maxNew = s.Model.Config().Context
	}
	opt := gpu.SampleOptions{Temperature: temperature, Greedy: temperature == 0, MaxNewTokens: maxNew,
		Seeds: gpu.PromptSeeds(seed, len(ids)), EOS: s.Tokenizer.EOS()}
	got, err := s.Model.Sample(ids, n, opt)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	out := make([]Completion, len(got))
	for i, g := range got {
		text := g.Tokens
		if g.Finish == gpu.FinishStop && len(text) > 0 {
			text = text[:len(text)-1]
		}
		out[i] = Completion{Text: s.Tokenizer.Decode(text), Tokens: len(g.Tokens)}
	}
	if temperature == 0 {
		return out, nil
	}
	return out, s.addEntropies(out, got, ids, temperature)
}

// addEntropies scores the samples at temperature and stores each one's
// summed per-token entropy.
func (s ModelSampler) addEntropies(dst []Completion, got []gpu.Sample, prompts [][]int, temperature float64) error {
	seqs := make([]gpu.Sequence, len(got))
	for i, g := range got {
		seqs[i] = gpu.Sequence{Prompt: prompts[g.Prompt], Completion: g.Tokens}
	}
	scores, err := s.Model.Score(seqs, temperature)
	if err != nil {
		return fmt.Errorf("score samples: %w", err)
	}
	for i, sc := range scores {
		var h float64
		for _, e := range sc.Entropies {
			h += e
		}
		dst[i].EntropySum = h
	}
	return nil
}
