package gpu

import (
	"cmp"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/hfconfig"
	"github.com/mgrpo/mgrpo/gpu/safetensors"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// TestCheckpointRoundTrip: save → load gives the same config, version,
// weights and scores, for every decoder family (weights after a learner
// step, biases and q/k norms away from their initial values), and
// config.json and model.safetensors are in Hugging Face's terms: the
// model type and architecture, and exactly the layout's tensor names.
func TestCheckpointRoundTrip(t *testing.T) {
	tiny, _ := Preset("tiny")
	tied := tiny
	tied.TieEmbeddings = true
	gqa := Config{Vocab: 98, Hidden: 16, Layers: 1, Heads: 4, KVHeads: 2, MLP: 24, Context: 16, RopeTheta: 500, NormEps: 1e-5}
	for _, cfg := range []Config{tiny, tied, gqa, contractArch(ArchQwen2), contractArch(ArchQwen3), contractArch(ArchMistral), contractArch("llama3-rope")} {
		m := steppedModel(t, cfg)
		dir := t.TempDir()
		if err := SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
			t.Fatal(err)
		}
		got, tok, err := LoadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.Config() != cfg || got.Version() != 1 || tok.VocabSize() != 98 {
			t.Errorf("config %+v version %d vocab %d after round trip, want %+v 1 98", got.Config(), got.Version(), tok.VocabSize(), cfg)
		}
		if !reflect.DeepEqual(got.Weights(), m.Weights()) {
			t.Errorf("%+v: weights changed in the round trip", cfg)
		}
		seqs := []Sequence{{Prompt: []int{1, 20, 14}, Completion: []int{21, 2}}, {Prompt: []int{1, 5}, Completion: []int{30, 31, 32, 2}}}
		a, _ := m.Score(seqs, 1)
		b, _ := got.Score(seqs, 1)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("scores differ after the round trip: %v vs %v", a, b)
		}
		checkHFFiles(t, dir, cfg)
	}
}

// steppedModel is a model of cfg with the contract's weights after one
// supervised learner step (version 1).
func steppedModel(t *testing.T, cfg Config) *Model {
	t.Helper()
	_, w := oracleWeights(cfg, 4)
	m0, err := NewModelFromWeights(cfg, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLearner(m0, DefaultLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SupervisedStep([]Sequence{{Prompt: []int{1, 20, 14}, Completion: []int{21, 22, 2}}}); err != nil {
		t.Fatal(err)
	}
	return l.Snapshot()
}

// checkHFFiles checks a checkpoint's config.json model type and
// architecture and that model.safetensors holds exactly the layout's
// tensors, by Hugging Face name and shape.
func checkHFFiles(t *testing.T, dir string, cfg Config) {
	t.Helper()
	h, err := hfconfig.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := cmp.Or(cfg.Arch, ArchLlama); h.ModelType != want || !slices.Equal(h.Architectures, []string{hfconfig.CausalLM(want)}) {
		t.Errorf("%s: model_type %q, architectures %v", dir, h.ModelType, h.Architectures)
	}
	checkFixtureTensors(t, dir, cfg)
}

// rewrite replaces model.safetensors in dir by the given tensors.
func rewrite(t *testing.T, dir string, edit func([]safetensors.Tensor) []safetensors.Tensor) {
	t.Helper()
	path := filepath.Join(dir, WeightsFileName)
	f, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, name := range f.Tensors() {
		v, shape, _ := f.Float64(name)
		ts = append(ts, safetensors.Tensor{Name: name, Shape: shape, F64: v})
	}
	if err := safetensors.Write(path, edit(ts), f.Metadata()); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCheckpointErrors(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 4)
	fresh := func() string {
		dir := t.TempDir()
		if err := SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// F64 tensors load and convert.
	dir := fresh()
	rewrite(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor { return ts })
	if got, err := LoadModel(dir); err != nil || !reflect.DeepEqual(got.Weights(), m.Weights()) {
		t.Errorf("F64 checkpoint: err %v or weights differ", err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(dir string)
	}{
		{"missing tensor", `"model.layers.1.mlp.up_proj.weight" missing`, func(dir string) {
			rewrite(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				return slicesDeleteFunc(ts, func(x safetensors.Tensor) bool { return x.Name == "model.layers.1.mlp.up_proj.weight" })
			})
		}},
		{"wrong shape", `"model.norm.weight" has shape [2 16]`, func(dir string) {
			rewrite(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.norm.weight" {
						ts[i].Shape = []int{2, 16}
					}
				}
				return ts
			})
		}},
		{"corrupt file", "safetensors", func(dir string) {
			os.WriteFile(filepath.Join(dir, WeightsFileName), []byte("not a safetensors file"), 0o644)
		}},
		{"no config", "config.json", func(dir string) { os.Remove(filepath.Join(dir, "config.json")) }},
		{"NaN weight", `"model.layers.0.mlp.up_proj.weight" holds NaN at index 3`, func(dir string) {
			rewrite(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.layers.0.mlp.up_proj.weight" {
						ts[i].F64[3] = math.NaN()
					}
				}
				return ts
			})
		}},
		{"infinite weight", `"model.norm.weight" holds -Inf at index 0`, func(dir string) {
			rewrite(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.norm.weight" {
						ts[i].F64[0] = math.Inf(-1)
					}
				}
				return ts
			})
		}},
	} {
		dir := fresh()
		tc.edit(dir)
		_, _, err := LoadCheckpoint(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if tc.name == "missing tensor" && !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: error does not wrap ErrCheckpoint", tc.name)
		}
	}
}

func slicesDeleteFunc(ts []safetensors.Tensor, del func(safetensors.Tensor) bool) []safetensors.Tensor {
	var out []safetensors.Tensor
	for _, x := range ts {
		if !del(x) {
			out = append(out, x)
		}
	}
	return out
}

// TestMistralIsLlama: a Mistral model (a sliding window that spans its
// context) computes what the Llama model of the same shape and weights
// does, bit for bit, and is written back as model_type mistral.
func TestMistralIsLlama(t *testing.T) {
	mistral := contractArch(ArchMistral)
	llama := mistral
	llama.Arch = ""
	_, w := oracleWeights(mistral, 4)
	a, err := NewModelFromWeights(mistral, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewModelFromWeights(llama, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	seqs := []Sequence{{Prompt: []int{1, 20, 14}, Completion: []int{21, 2}}, {Prompt: []int{1, 5}, Completion: []int{30, 31, 32, 2}}}
	sa, errA := a.Score(seqs, 1)
	sb, errB := b.Score(seqs, 1)
	if errA != nil || errB != nil || !reflect.DeepEqual(sa, sb) {
		t.Errorf("Mistral scores %v (%v), Llama's %v (%v): want the same", sa, errA, sb, errB)
	}
	dir := t.TempDir()
	if err := SaveCheckpoint(dir, a, tokenizer.NewChar()); err != nil {
		t.Fatal(err)
	}
	h, err := hfconfig.Read(dir)
	if err != nil || h.ModelType != hfconfig.ModelMistral || h.Architectures[0] != "MistralForCausalLM" {
		t.Errorf("written as %q %v (%v), want mistral", h.ModelType, h.Architectures, err)
	}
}
