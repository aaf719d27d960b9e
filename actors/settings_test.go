package actors

import (
	"errors"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// TestModelConfig: presets resolve to gpu's table with every explicit
// dimension and model.rope_theta applied (0 keeps the preset's: a run of
// smollm2-135m had Llama's 10000 and an untied lm_head, 162.8 M weights
// instead of its 134.5 M); a preset gpu does not know and dimensions no
// model can have are configuration errors naming the key.
func TestModelConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    config.Model
		want gpu.Config
	}{
		{name: "small preset", m: config.Model{Preset: "small"}, want: gpu.Config{Vocab: 98, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 4, MLP: 192, Context: 64, RopeTheta: 10000, NormEps: 1e-6}},
		{name: "preset with context override", m: config.Model{Preset: "base", Context: 128}, want: gpu.Config{Vocab: 98, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 4, MLP: 384, Context: 128, RopeTheta: 10000, NormEps: 1e-6}},
		{name: "explicit heads resets kv heads", m: config.Model{Preset: "tiny", Heads: 4}, want: gpu.Config{Vocab: 98, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 4, MLP: 64, Context: 64, RopeTheta: 10000, NormEps: 1e-6}},
		{name: "explicit GQA", m: config.Model{Hidden: 48, Layers: 1, Heads: 4, KVHeads: 2, MLP: 96, Context: 16}, want: gpu.Config{Vocab: 98, Hidden: 48, Layers: 1, Heads: 4, KVHeads: 2, MLP: 96, Context: 16, RopeTheta: 10000, NormEps: 1e-6}},
		{name: "explicit theta, tied", m: config.Model{Preset: "tiny", RopeTheta: 5e5, TieEmbeddings: true}, want: gpu.Config{Vocab: 98, Hidden: 32, Layers: 2, Heads: 2, KVHeads: 2, MLP: 64, Context: 64, RopeTheta: 5e5, NormEps: 1e-6, TieEmbeddings: true}},
		{name: "smollm2-135m keeps its theta and tie", m: config.Model{Preset: "smollm2-135m"}, want: gpu.Config{Vocab: 49152, Hidden: 576, Layers: 30, Heads: 9, KVHeads: 3, MLP: 1536, Context: 2048, RopeTheta: 1e5, NormEps: 1e-5, TieEmbeddings: true}},
		{name: "qwen2.5-0.5b keeps its theta and tie", m: config.Model{Preset: "qwen2.5-0.5b"}, want: gpu.Config{Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, MLP: 4864, Context: 2048, RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: gpu.ArchQwen2}},
	} {
		if got, err := modelConfig(tc.m, 8); err != nil || got != tc.want {
			t.Errorf("%s: modelConfig = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name       string
		modify     func(m *config.Model)
		completion int
		key        string
		want       error
	}{
		{"unknown preset", func(m *config.Model) { m.Preset = "huge" }, 8, "model.preset", config.ErrRange},
		{"hidden not multiple of heads", func(m *config.Model) { m.Hidden = 66 }, 8, "model.hidden", config.ErrConflict},
		{"kv heads do not divide heads", func(m *config.Model) { m.KVHeads = 3 }, 8, "model.kv_heads", config.ErrConflict},
		{"odd head size", func(m *config.Model) { m.Hidden = 36 }, 8, "model.hidden", config.ErrConflict},
		{"completion longer than context", func(*config.Model) {}, 64, "generation.max_completion_len", config.ErrConflict},
		{"hidden past the bound", func(m *config.Model) { m.Hidden = 1 << 30 }, 8, "model.hidden", config.ErrRange},
		{"layers past the bound", func(m *config.Model) { m.Layers = 100_000_000 }, 8, "model.layers", config.ErrRange},
		{"heads past the bound", func(m *config.Model) { m.Heads = 1 << 30 }, 8, "model.heads", config.ErrRange},
		{"kv heads past the bound", func(m *config.Model) { m.KVHeads = 1 << 30 }, 8, "model.kv_heads", config.ErrRange},
		{"mlp past the bound", func(m *config.Model) { m.MLP = 1 << 30 }, 8, "model.mlp", config.ErrRange},
		{"context past the bound", func(m *config.Model) { m.Context = 2_000_000_000 }, 8, "model.context", config.ErrRange},
		{"too many weights", func(m *config.Model) { m.Hidden, m.MLP, m.Layers = 65536, 65536, 1024 }, 8, "model", config.ErrRange},
		{"rope theta not finite", func(m *config.Model) { m.RopeTheta = -1 }, 8, "model", config.ErrRange},
	} {
		m := config.Default().Model
		tc.modify(&m)
		_, err := modelConfig(m, tc.completion)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want a %v naming %s", tc.name, err, tc.want, tc.key)
		}
	}
}

// TestRecipesResolve: every embedded recipe names a preset and dimensions
// a model can have.
func TestRecipesResolve(t *testing.T) {
	for _, name := range config.Recipes() {
		cfg, err := config.Load(config.Sources{File: "recipe:" + name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := modelConfig(cfg.Model, cfg.Generation.MaxCompletionLen); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPipelineOptionsByRole: role all has every pool local; a learner
// node only those of the other roles it has, and holds the first
// generation for cluster.min_generators.
func TestPipelineOptionsByRole(t *testing.T) {
	for _, tc := range []struct {
		role                      string
		generators, rewards, refs int
		min                       int
	}{
		{"all", 2, 1, 1, 0},
		{"learner", 0, 0, 0, 3},
		{"learner,reward,reference", 0, 3, 1, 3},
		{"learner,generator", 2, 0, 0, 3},
	} {
		c := config.Default().Cluster
		c.Role, c.Generators, c.RewardEvaluators, c.MinGenerators = tc.role, 2, 3, 3
		o := pipelineOptionsOf(c)
		if o.Generators != tc.generators || o.RewardEvaluators != tc.rewards || o.ReferenceScorers != tc.refs || o.MinGenerators != tc.min {
			t.Errorf("role %s: pools %d/%d/%d, min generators %d; want %d/%d/%d, %d", tc.role,
				o.Generators, o.RewardEvaluators, o.ReferenceScorers, o.MinGenerators, tc.generators, tc.rewards, tc.refs, tc.min)
		}
	}
}

// TestRewardFuncs: rewards.funcs resolves names and aliases to the
// canonical reward functions, and a name that is no reward function is a
// configuration error naming rewards.funcs and the name (it was a plain
// failure, exit 1, "rewards: tasks: unknown reward function").
func TestRewardFuncs(t *testing.T) {
	task, err := tasks.New("addition", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		funcs []string
		want  []string // canonical names; nil: refused
		value string   // the name the error shows
	}{
		{name: "default", funcs: []string{"accuracy"}, want: []string{"accuracy"}},
		{name: "aliases", funcs: []string{"binary", "format_reward", "len"}, want: []string{"correct", "format", "length"}},
		{name: "unknown", funcs: []string{"accuracy", "foo"}, value: `"foo"`},
		{name: "unknown first", funcs: []string{"acuracy", "format"}, value: `"acuracy"`},
	} {
		fns, err := rewardFuncs(config.Rewards{Funcs: tc.funcs}, task)
		if tc.want == nil {
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Key != "rewards.funcs" || ce.Value != tc.value || !errors.Is(err, config.ErrRange) {
				t.Errorf("%s: error %v, want a config.ErrRange naming rewards.funcs = %s", tc.name, err, tc.value)
			}
			continue
		}
		if err != nil || len(fns) != len(tc.want) {
			t.Fatalf("%s: rewardFuncs = %d functions, %v; want %v", tc.name, len(fns), err, tc.want)
		}
		for i, f := range fns {
			if f.Name != tc.want[i] || f.Weight != 1 {
				t.Errorf("%s: function %d = %s (weight %v), want %s (weight 1)", tc.name, i, f.Name, f.Weight, tc.want[i])
			}
		}
	}
}
