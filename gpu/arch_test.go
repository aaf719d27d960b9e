package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/hfconfig"
)

// archConfigs are small configs of each architecture, with grouped KV
// heads, and Qwen3's head width unlike hidden/heads.
func archConfigs() map[string]Config {
	base := Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 32, Context: 64, RopeTheta: 1e6, NormEps: 1e-6}
	q2, q3, l3 := base, base, base
	q2.Arch, q2.TieEmbeddings = ArchQwen2, true
	q3.Arch, q3.HeadWidth = ArchQwen3, 6
	l3.RopeScaling = RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}
	return map[string]Config{"llama": base, "qwen2": q2, "qwen3": q3, "llama3-rope": l3}
}

// TestArchLayout: each layer's tensors in the documented order (layout),
// Hugging Face's names, contiguous offsets and Llama's list unchanged.
func TestArchLayout(t *testing.T) {
	llama := []string{"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
		"self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}
	with := func(extra ...string) []string { return append(append(slices.Clone(llama[:4]), extra...), llama[4:]...) }
	for name, tc := range map[string]struct {
		want  []string
		shape map[string][]int
	}{
		"llama":       {llama, nil},
		"llama3-rope": {llama, nil},
		"qwen2": {with("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"),
			map[string][]int{"self_attn.q_proj.bias": {16}, "self_attn.k_proj.bias": {8}, "self_attn.v_proj.bias": {8}}},
		"qwen3": {with("self_attn.q_norm.weight", "self_attn.k_norm.weight"),
			map[string][]int{"self_attn.q_proj.weight": {24, 16}, "self_attn.k_proj.weight": {12, 16},
				"self_attn.q_norm.weight": {6}, "self_attn.k_norm.weight": {6}, "self_attn.o_proj.weight": {16, 24}}},
	} {
		c := archConfigs()[name]
		l := newLayout(c)
		var got []string
		next := 0
		for _, s := range l.specs {
			if s.Offset != next {
				t.Errorf("%s: %s at offset %d, want %d", name, s.Name, s.Offset, next)
			}
			next += s.Size()
			layer, ok := strings.CutPrefix(s.Name, "model.layers.1.")
			if !ok {
				continue
			}
			got = append(got, layer)
			if want, ok := tc.shape[layer]; ok && !reflect.DeepEqual(s.Shape, want) {
				t.Errorf("%s: %s shape %v, want %v", name, s.Name, s.Shape, want)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: layer tensors %v\nwant %v", name, got, tc.want)
		}
		if next != l.size || float64(l.size) != c.params() || c.NumParams() != l.size {
			t.Errorf("%s: layout size %d, ends at %d, params %g", name, l.size, next, c.params())
		}
	}
}

// TestLlamaParamsUnchanged pins the presets' weight counts (V·D +
// L·(2D + D·(H+2G)·E + H·E·D + 3·D·M) + D, plus V·D untied) to the values
// every Llama checkpoint was written with.
func TestLlamaParamsUnchanged(t *testing.T) {
	for _, tc := range []struct {
		preset string
		tied   bool
		want   int
	}{{"tiny", false, 26912}, {"small", false, 119360}, {"base", false, 878208}, {"base", true, 865664}} {
		c, _ := Preset(tc.preset)
		c.TieEmbeddings = tc.tied
		if got := c.NumParams(); got != tc.want || c.params() != float64(tc.want) {
			t.Errorf("%s tied %t: NumParams %d, params %g; want %d", tc.preset, tc.tied, got, c.params(), tc.want)
		}
	}
}

// TestArchEstimates: the new tensors are counted exactly in the weights
// and the model's memory, and the learner's estimate grows by at least
// their weights, gradients and two moments.
func TestArchEstimates(t *testing.T) {
	cs := archConfigs()
	llama := cs["llama"]
	llama.TieEmbeddings = true
	q3llama := llama // the Llama of Qwen3's head width
	q3llama.TieEmbeddings, q3llama.HeadWidth = false, 6
	for _, tc := range []struct {
		name      string
		c, like   Config
		newFloats int
	}{
		{"qwen2", cs["qwen2"], llama, 2 * (4 + 2*2) * 4}, // L·(H+2G)·E biases
		{"qwen3", cs["qwen3"], q3llama, 2 * 2 * 6},       // L·2E norm weights
	} {
		if d := tc.c.NumParams() - tc.like.NumParams(); d != tc.newFloats {
			t.Errorf("%s: %d more weights than its Llama, want %d", tc.name, d, tc.newFloats)
		}
		if d := tc.c.WeightBytes() - tc.like.WeightBytes(); d != 4*int64(tc.newFloats) {
			t.Errorf("%s: WeightBytes grows by %d, want %d", tc.name, d, 4*tc.newFloats)
		}
		if d := tc.c.ModelBytes() - tc.like.ModelBytes(); d != 4*int64(tc.newFloats) {
			t.Errorf("%s: ModelBytes grows by %d, want %d", tc.name, d, 4*tc.newFloats)
		}
		if d := tc.c.LearnerBytes(8, 32) - tc.like.LearnerBytes(8, 32); d < 16*int64(tc.newFloats) {
			t.Errorf("%s: LearnerBytes grows by %d, want at least %d", tc.name, d, 16*tc.newFloats)
		}
	}
	if q3, l := cs["qwen3"].ScoreBytes(8, 32), q3llama.ScoreBytes(8, 32); q3 <= l {
		t.Errorf("qwen3 ScoreBytes %d, not above its Llama's %d (q/k norm activations)", q3, l)
	}
	wide := llama
	wide.HeadWidth = 8 // twice hidden/heads: twice the key/value cache
	if w, l := wide.SampleBytes(4, 2, 8, 32), llama.SampleBytes(4, 2, 8, 32); w <= l {
		t.Errorf("SampleBytes with head width 8: %d, not above %d with 4", w, l)
	}
}

// TestArchBindParams: the new views cover exactly their tensors; Llama's
// are nil.
func TestArchBindParams(t *testing.T) {
	for name, c := range archConfigs() {
		l := newLayout(c)
		flat := make([]float64, l.size)
		for i := range flat {
			flat[i] = float64(i)
		}
		p := bindParams(c, flat)
		for i, lp := range p.layers {
			n := fmt.Sprintf("model.layers.%d.self_attn.", i)
			views := []struct {
				got         []float64
				first, last string
				on          bool
			}{
				{lp.qkv, "q_proj.weight", "v_proj.weight", true},
				{lp.qkvBias, "q_proj.bias", "v_proj.bias", c.QKVBias()},
				{lp.qNorm, "q_norm.weight", "q_norm.weight", c.QKNorm()},
				{lp.kNorm, "k_norm.weight", "k_norm.weight", c.QKNorm()},
			}
			for _, v := range views {
				if !v.on {
					if v.got != nil {
						t.Errorf("%s layer %d: %s view is set", name, i, v.first)
					}
					continue
				}
				a, b := l.tensor(n+v.first), l.tensor(n+v.last)
				if len(v.got) != b.Offset+b.Size()-a.Offset || v.got[0] != float64(a.Offset) {
					t.Errorf("%s layer %d: %s..%s view has %d elements from %g", name, i, v.first, v.last, len(v.got), v.got[0])
				}
			}
		}
	}
}

// TestArchInitWeights: biases start at zero, q/k norm weights at one, and
// neither takes weight decay.
func TestArchInitWeights(t *testing.T) {
	for name, c := range archConfigs() {
		flat := make([]float64, c.NumParams())
		initWeights(flat, c, 7)
		for _, s := range newLayout(c).specs {
			w := flat[s.Offset : s.Offset+s.Size()]
			bias, norm := strings.HasSuffix(s.Name, ".bias"), strings.HasSuffix(s.Name, "norm.weight")
			if s.Bias != bias || s.Norm != norm || s.NoDecay() != (bias || norm) {
				t.Errorf("%s: %s Bias %t Norm %t NoDecay %t", name, s.Name, s.Bias, s.Norm, s.NoDecay())
			}
			for _, x := range w {
				if (bias && x != 0) || (norm && x != 1) || (!bias && !norm && (x == 0 || x == 1)) {
					t.Errorf("%s: %s starts at %g", name, s.Name, x)
					break
				}
			}
		}
	}
}

func TestArchValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"qwen2", func(c *Config) { c.Arch = ArchQwen2 }, ""},
		{"explicit llama", func(c *Config) { c.Arch = ArchLlama }, ""},
		{"unknown", func(c *Config) { c.Arch = "gemma" }, `arch = "gemma": want "llama", "qwen2", "qwen3" or "mistral"`},
		{"head width", func(c *Config) { c.Arch, c.HeadWidth = ArchQwen3, 12 }, ""},
		{"head width, hidden not a multiple", func(c *Config) { c.Hidden, c.HeadWidth = 33, 8 }, ""},
		{"negative head width", func(c *Config) { c.HeadWidth = -2 }, "head_width = -2"},
		{"odd head width", func(c *Config) { c.HeadWidth = 7 }, "head dim = 7 must be even"},
		{"huge head width", func(c *Config) { c.HeadWidth = MaxDim + 2 }, "head_width = 1048578: must be at most 1048576"},
		{"hidden not a multiple", func(c *Config) { c.Hidden = 33 }, "hidden = 33 is not a multiple of heads = 2"},
	} {
		c, _ := Preset("tiny")
		tc.edit(&c)
		checkConfigErr(t, tc.name, c.Validate(), tc.want)
	}
}

// TestArchHFConfigRoundTrip: Config → config.json → Config is the
// identity for every architecture, config.json has the model type's
// model_type, architectures and head_dim, and a Llama config's JSON (the
// cluster's JoinReply) has none of the new keys.
func TestArchHFConfigRoundTrip(t *testing.T) {
	for name, c := range archConfigs() {
		dir := t.TempDir()
		if err := hfconfig.Write(dir, c.HFConfig(1, 2, 0)); err != nil {
			t.Fatal(err)
		}
		h, err := hfconfig.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ConfigFromHF(h)
		if err != nil || back != c {
			t.Errorf("%s: round trip %+v, %v\nwant %+v", name, back, err, c)
		}
		wantType := map[string]string{"qwen2": "qwen2", "qwen3": "qwen3"}[name]
		if wantType == "" {
			wantType = "llama"
		}
		if h.ModelType != wantType || h.Architectures[0] != hfconfig.CausalLM(wantType) || h.HeadDim != c.HeadDim() {
			t.Errorf("%s: model_type %s, architectures %v, head_dim %d", name, h.ModelType, h.Architectures, h.HeadDim)
		}
		var j Config
		b, _ := json.Marshal(c)
		if err := json.Unmarshal(b, &j); err != nil || j != c {
			t.Errorf("%s: JSON round trip %s gives %+v, %v", name, b, j, err)
		}
		if name == "llama" && (strings.Contains(string(b), "arch") || strings.Contains(string(b), "head_width") || strings.Contains(string(b), "rope_scaling")) {
			t.Errorf("a Llama Config's JSON has new keys: %s", b)
		}
	}
}

// checkConfigErr fails the test unless err is nil where want is "", or
// wraps ErrBadConfig and contains want.
func checkConfigErr(t *testing.T, name string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", name, err)
	case want != "" && (!errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want ErrBadConfig containing %q", name, err, want)
	}
}

// TestArchPresets: qwen2- and qwen3- before a Llama preset's name give
// its shape in that family; anything else is refused with the names, and
// qwen2.5-0.5b is a Qwen2 that takes no prefix.
func TestArchPresets(t *testing.T) {
	base, _ := Preset("base")
	for _, arch := range []string{ArchQwen2, ArchQwen3} {
		c, err := Preset(arch + "-base")
		want := base
		want.Arch = arch
		if err != nil || c != want {
			t.Errorf("Preset(%s-base) = %+v, %v; want %+v", arch, c, err, want)
		}
	}
	for _, name := range []string{"qwen4-base", "qwen2-huge", "qwen2-", "-base"} {
		if _, err := Preset(name); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "qwen2- or qwen3-") {
			t.Errorf("Preset(%q) = %v, want ErrBadConfig naming the presets", name, err)
		}
	}
	if c, err := Preset("qwen2.5-0.5b"); err != nil || c.Arch != ArchQwen2 || c.NumParams() != 494032768 {
		t.Errorf("Preset(qwen2.5-0.5b) = %+v (%d weights), %v; want Qwen2.5-0.5B, a Qwen2 of 494032768", c, c.NumParams(), err)
	}
	for _, name := range []string{"qwen2-qwen2.5-0.5b", "qwen3-qwen2.5-0.5b"} { // one name for one model
		if _, err := Preset(name); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "already") {
			t.Errorf("Preset(%q) = %v, want ErrBadConfig: a qwen2 model already", name, err)
		}
	}
}
