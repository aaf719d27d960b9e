package actors

import (
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// TestStageTimeouts: cluster.request_timeout, when set, bounds every
// stage; unset, the demo presets keep 30 s and a run whose requests hold
// minutes of work gets timeouts well past what they took: the README's
// Qwen-vocabulary run on a CPU, whose parts took up to 137 s to generate
// and whose learner steps up to 216 s (docs/BENCHMARKS.md), and which
// skipped every step under a fixed 30 s.
func TestStageTimeouts(t *testing.T) {
	qwenVocab := gpu.Config{Vocab: 151936, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 4, MLP: 384, Context: 512}
	for _, tc := range []struct {
		name    string
		preset  string     // or model
		model   gpu.Config // when preset is ""
		fixed   time.Duration
		device  string
		atLeast map[messages.Stage]time.Duration
		atMost  map[messages.Stage]time.Duration
	}{
		{name: "fixed", preset: "base", fixed: 2 * time.Second, device: "cpu",
			atLeast: everyStage(2 * time.Second), atMost: everyStage(2 * time.Second)},
		{name: "tiny", preset: "tiny", device: "cpu", atLeast: everyStage(minTimeout), atMost: everyStage(minTimeout)},
		{name: "base", preset: "base", device: "cpu", atLeast: everyStage(minTimeout), atMost: everyStage(2 * time.Minute)},
		{name: "qwen vocabulary on a cpu", model: qwenVocab, device: "cpu",
			atLeast: map[messages.Stage]time.Duration{messages.Stage_GENERATE: 5 * 137 * time.Second, messages.Stage_REWARD: 5 * 137 * time.Second,
				messages.Stage_REFERENCE: 5 * 137 * time.Second, messages.Stage_LEARN: 5 * 216 * time.Second, messages.Stage_CONTROL: minTimeout},
			atMost: map[messages.Stage]time.Duration{messages.Stage_GENERATE: time.Hour, messages.Stage_LEARN: 4 * time.Hour, messages.Stage_CONTROL: minTimeout}},
		{name: "qwen vocabulary on a gpu", model: qwenVocab, device: "cuda", atLeast: everyStage(minTimeout), atMost: everyStage(minTimeout)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Cluster.RequestTimeout, cfg.Model.Device = tc.fixed, tc.device
			model := tc.model
			if tc.preset != "" {
				var err error
				if model, err = gpu.Preset(tc.preset); err != nil {
					t.Fatal(err)
				}
			}
			got := stageTimeouts(cfg, model, model.Context)
			for s, want := range tc.atLeast {
				if got[s] < want {
					t.Errorf("%s: %v, want at least %v", s, got[s], want)
				}
			}
			for s, want := range tc.atMost {
				if got[s] > want {
					t.Errorf("%s: %v, want at most %v", s, got[s], want)
				}
			}
		})
	}
}

// everyStage is d for every stage with a request timeout.
func everyStage(d time.Duration) map[messages.Stage]time.Duration {
	m := make(map[messages.Stage]time.Duration)
	for _, s := range []messages.Stage{messages.Stage_GENERATE, messages.Stage_REWARD, messages.Stage_REFERENCE,
		messages.Stage_LEARN, messages.Stage_CONTROL, messages.Stage_SYNC} {
		m[s] = d
	}
	return m
}
