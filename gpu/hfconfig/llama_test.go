package hfconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// smolLM2 is HuggingFaceTB/SmolLM2-135M's config.json as published on the
// Hugging Face hub (unknown keys such as use_cache are ignored).
const smolLM2 = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152}`

func TestReadHFConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(smolLM2), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.HiddenSize != 576 || c.NumKeyValueHeads != 3 || c.HeadDim != 64 || c.RopeTheta != 100000 ||
		c.RMSNormEps != 1e-5 || !c.TieWordEmbeddings || c.EOSTokenID != 0 || c.PadTokenID != -1 {
		t.Errorf("Read = %+v", c)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := New(98, 64, 192, 2, 4, 64, false) // the `small` preset, DESIGN §4
	want.BOSTokenID, want.EOSTokenID, want.PadTokenID = 1, 2, 0
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	got.RopeScaling, want.RopeScaling = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip = %+v\nwant %+v", got, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for key, val := range map[string]any{
		"model_type": "llama", "hidden_act": "silu", "torch_dtype": "float32", "head_dim": 16.0,
		"attention_bias": false, "mlp_bias": false, "pad_token_id": 0.0, "rope_scaling": nil,
	} {
		if !reflect.DeepEqual(m[key], val) {
			t.Errorf("config.json %s = %v, want %v", key, m[key], val)
		}
	}
	if a, _ := m["architectures"].([]any); len(a) != 1 || a[0] != "LlamaForCausalLM" {
		t.Errorf("architectures = %v", m["architectures"])
	}
}

func TestTokenIDForms(t *testing.T) {
	var c LlamaConfig
	if err := json.Unmarshal([]byte(`{"eos_token_id":[128001,128009],"bos_token_id":null}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.EOSTokenID != 128001 || !reflect.DeepEqual(c.EOSTokenIDs, []int{128001, 128009}) || c.BOSTokenID != -1 {
		t.Errorf("ids = %d %v %d", c.EOSTokenID, c.EOSTokenIDs, c.BOSTokenID)
	}
	if err := json.Unmarshal([]byte(`{"eos_token_id":"x"}`), &c); err == nil {
		t.Error("string eos_token_id accepted")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*LlamaConfig)
		want   string
	}{
		{"ok", func(*LlamaConfig) {}, ""},
		{"zero vocab", func(c *LlamaConfig) { c.VocabSize = 0 }, "vocab_size = 0: must be positive"},
		{"huge vocab", func(c *LlamaConfig) { c.VocabSize = 2000000000 }, "vocab_size = 2000000000: must be at most 4194304"},
		{"huge context", func(c *LlamaConfig) { c.MaxPositionEmbeddings = 100000000000 }, "max_position_embeddings = 100000000000: must be at most 131072"},
		{"huge hidden", func(c *LlamaConfig) { c.HiddenSize, c.HeadDim = 1<<24, 1<<22 }, "hidden_size = 16777216: must be at most 1048576"},
		{"huge mlp", func(c *LlamaConfig) { c.IntermediateSize = 1 << 21 }, "intermediate_size = 2097152: must be at most 1048576"},
		{"many layers", func(c *LlamaConfig) { c.NumHiddenLayers = 100000000 }, "num_hidden_layers = 100000000: must be at most 1024"},
		{"largest", func(c *LlamaConfig) { c.MaxPositionEmbeddings, c.NumHiddenLayers = 1<<17, 1024 }, ""},
		{"heads", func(c *LlamaConfig) { c.NumAttentionHeads, c.NumKeyValueHeads = 3, 3; c.HeadDim = 21 }, "hidden_size = 64: not divisible by num_attention_heads 3"},
		{"kv heads", func(c *LlamaConfig) { c.NumKeyValueHeads = 3 }, "num_attention_heads = 4: not divisible by num_key_value_heads 3"},
		{"head dim", func(c *LlamaConfig) { c.HeadDim = 0 }, "head_dim = 0: must be positive"},
		{"explicit head dim", func(c *LlamaConfig) { c.HeadDim = 32 }, ""},
		{"explicit head dim, hidden not divisible", func(c *LlamaConfig) { c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 3, 3, 32 }, ""},
		{"eps", func(c *LlamaConfig) { c.RMSNormEps = -1 }, "rms_norm_eps"},
		{"act", func(c *LlamaConfig) { c.HiddenAct = "gelu" }, "hidden_act = gelu"},
		{"bias", func(c *LlamaConfig) { c.MLPBias = true }, "mlp_bias"},
		{"o bias", func(c *LlamaConfig) { c.AttentionBias = true }, "attention_bias = true: a bias on o_proj"},
		{"rope scaling", func(c *LlamaConfig) { c.RopeScaling = &RopeScaling{RopeType: "llama3"} }, "rope_scaling.factor = 0: must be at least 1"},
		{"eos range", func(c *LlamaConfig) { c.EOSTokenID = 98 }, "eos_token_id = 98"},
		{"model type", func(c *LlamaConfig) { c.ModelType = "gemma" }, `model_type = gemma: want "llama", "qwen2", "qwen3" or "mistral"`},
		{"qwen2", func(c *LlamaConfig) { c.SetModelType(ModelQwen2) }, ""},
		{"qwen2 ignores attention_bias", func(c *LlamaConfig) { c.SetModelType(ModelQwen2); c.AttentionBias = true }, ""},
		{"qwen3 o bias", func(c *LlamaConfig) { c.SetModelType(ModelQwen3); c.AttentionBias = true }, "attention_bias = true"},
	}
	for _, tc := range cases {
		c := New(98, 64, 192, 2, 4, 64, false)
		tc.modify(&c)
		err := c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, New(0, 64, 192, 2, 4, 64, false)); err == nil {
		t.Fatal("Write accepted vocab_size 0")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed Write left %d files", len(entries))
	}
}

// TestRopeParameters: transformers 5 writes RoPE's theta under
// rope_parameters; it must reach RopeTheta, not fall back to 10000.
func TestRopeParameters(t *testing.T) {
	base := `"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
	  "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32`
	for _, tc := range []struct {
		name, extra string
		theta       float64
		err         string
	}{
		{"rope_parameters only", `"rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}`, 500000, ""},
		{"both, equal", `"rope_theta": 500000, "rope_parameters": {"rope_theta": 500000}`, 500000, ""},
		{"neither", ``, 10000, ""},
		{"null", `"rope_parameters": null`, 10000, ""},
		{"both, different", `"rope_theta": 10000, "rope_parameters": {"rope_theta": 500000}`, 0, "rope_parameters.rope_theta = 500000"},
		{"scaled, incomplete", `"rope_parameters": {"rope_theta": 500000, "rope_type": "llama3"}`, 0, `rope_parameters.factor is missing`},
		{"scaled", `"rope_parameters": {"rope_theta": 500000, "rope_type": "llama3", "factor": 32.0,
		  "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}`, 500000, ""},
		{"yarn", `"rope_parameters": {"rope_theta": 500000, "rope_type": "yarn", "factor": 4.0}`, 0, `rope_parameters.rope_type = "yarn"`},
		{"not an object", `"rope_parameters": 3`, 0, "rope_parameters = 3"},
	} {
		doc := "{" + base
		if tc.extra != "" {
			doc += ", " + tc.extra
		}
		var c LlamaConfig
		err := json.Unmarshal([]byte(doc+"}"), &c)
		switch {
		case tc.err != "":
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want ErrInvalid containing %q", tc.name, err, tc.err)
			}
		case err != nil || c.RopeTheta != tc.theta || c.Validate() != nil:
			t.Errorf("%s: theta %g, error %v, validate %v; want theta %g", tc.name, c.RopeTheta, err, c.Validate(), tc.theta)
		}
	}
}
