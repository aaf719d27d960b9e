package evaluate

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

func tinySampler(t *testing.T) ModelSampler {
	t.Helper()
	cfg, err := gpu.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ModelSampler{Model: m, Tokenizer: tokenizer.NewChar(), MaxNewTokens: 8}
}

func TestModelSamplerShapes(t *testing.T) {
	s := tinySampler(t)
	prompts := []string{"12+34=", "5+6="}
	for _, temp := range []float64{0, 1} {
		got, err := s.Sample(context.Background(), prompts, 3, temp, 9)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 6 {
			t.Fatalf("T=%v: %d completions, want 6", temp, len(got))
		}
		for i, c := range got {
			// An untrained model rarely draws EOS; each completion has 1..8 tokens.
			if c.Tokens < 1 || c.Tokens > 8 || len(c.Text) > c.Tokens {
				t.Errorf("T=%v completion %d: %d tokens, text %q", temp, i, c.Tokens, c.Text)
			}
			// Entropy is in [0, ln V] per token when sampled, 0 when greedy.
			perTok := c.EntropySum / float64(c.Tokens)
			if temp > 0 && !(perTok > 0 && perTok <= math.Log(gpu.PresetVocab)+1e-9) {
				t.Errorf("T=%v completion %d: entropy per token %v outside (0, ln 98]", temp, i, perTok)
			}
			if temp == 0 && c.EntropySum != 0 {
				t.Errorf("greedy completion %d has entropy %v", i, c.EntropySum)
			}
		}
		if temp == 0 && (got[0] != got[1] || got[1] != got[2]) {
			t.Errorf("greedy samples of one prompt differ: %+v", got[:3])
		}
	}
}

func TestRunWithTinyModelDeterministic(t *testing.T) {
	task, err := tasks.New("addition", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := tinySampler(t)
	opts := Options{N: 4, K: 2, Temperature: 1, Seed: 5}
	a, err := Run(context.Background(), s, task, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), s, task, opts)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("same seed, different results:\n%+v\n%+v", a, b)
	}
	if a.PassAtK < a.MeanAtK || a.MeanAtK < 0 || a.PassAtK > 1 || a.EntropyPerToken <= 0 {
		t.Errorf("inconsistent result %+v (need 0 <= mean@k <= pass@k <= 1, entropy > 0)", a)
	}
}

// TestRunRefusesEvaluationTooLargeForMemory: k = 10^9 samples per problem
// are refused with one line before anything is sampled.
func TestRunRefusesEvaluationTooLargeForMemory(t *testing.T) {
	if _, ok := gpu.AvailableMemory(); !ok {
		t.Skip("no /proc/meminfo")
	}
	cfg, _ := gpu.Preset("tiny")
	m, _ := gpu.NewModel(cfg, 1)
	task, _ := tasks.New("addition", tasks.Options{})
	s := ModelSampler{Model: m, Tokenizer: tokenizer.NewChar()}
	_, err := Run(context.Background(), s, task, Options{N: 200, K: 1_000_000_000, Temperature: 1, Seed: 1})
	want := "evaluate addition: k=1000000000: gpu: not enough memory: sampling 64 prompts × 1000000000 completions needs"
	if !errors.Is(err, gpu.ErrMemory) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v, want one line starting %q", err, want)
	}
}
