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

// The config.json keys of three hub checkpoints (values as published;
// keys transformers ignores, such as use_cache, are left in).
const (
	qwen25 = `{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936}`
	qwen3 = `{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936}`
	llama32 = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}`
	mistral03 = `{
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.42.0.dev0", "use_cache": true, "vocab_size": 32768}`
)

// parse decodes and validates a config.json document.
func parse(doc string) (LlamaConfig, error) {
	var c LlamaConfig
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestReadHubConfigs(t *testing.T) {
	llama3 := &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	for _, tc := range []struct {
		name, doc, modelType    string
		hidden, heads, kv, head int
		theta, eps              float64
		tied                    bool
		scaling                 *RopeScaling
	}{
		{"Qwen2.5-0.5B", qwen25, ModelQwen2, 896, 14, 2, 64, 1e6, 1e-6, true, nil},
		{"Qwen3-0.6B", qwen3, ModelQwen3, 1024, 16, 8, 128, 1e6, 1e-6, true, nil},
		{"Llama-3.2-1B", llama32, ModelLlama, 2048, 32, 8, 64, 500000, 1e-5, true, llama3},
		{"Mistral-7B-v0.3", mistral03, ModelMistral, 4096, 32, 8, 128, 1e6, 1e-5, false, nil},
	} {
		c, err := parse(tc.doc)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.ModelType != tc.modelType || c.HiddenSize != tc.hidden || c.NumAttentionHeads != tc.heads ||
			c.NumKeyValueHeads != tc.kv || c.HeadDim != tc.head || c.RopeTheta != tc.theta ||
			c.RMSNormEps != tc.eps || c.TieWordEmbeddings != tc.tied || !reflect.DeepEqual(c.RopeScaling, tc.scaling) {
			t.Errorf("%s: read %+v (rope_scaling %+v)", tc.name, c, c.RopeScaling)
		}
		if len(c.Architectures) != 1 || c.Architectures[0] != CausalLM(tc.modelType) {
			t.Errorf("%s: architectures %v", tc.name, c.Architectures)
		}
	}
}

// TestRefusals: everything that would change the maths in a way the model
// does not implement is refused with one line naming the key; the values
// that leave the maths alone pass.
func TestRefusals(t *testing.T) {
	base := `"model_type": "qwen2", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
	  "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32`
	scaling := func(fields string) string { return `"rope_scaling": {` + fields + `}` }
	const l3 = `"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16`
	for _, tc := range []struct{ name, extra, want string }{
		{"plain", ``, ""},
		{"sliding window off", `"use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21`, ""},
		{"sliding window on", `"use_sliding_window": true, "sliding_window": 4096`, "use_sliding_window = true: sliding-window attention"},
		{"full layer types", `"layer_types": ["full_attention", "full_attention"]`, ""},
		{"sliding layer", `"layer_types": ["full_attention", "sliding_attention"]`, `layer_types[1] = "sliding_attention"`},
		{"layer types not a list", `"layer_types": 3`, "layer_types = 3"},
		{"experts", `"num_experts": 64, "num_experts_per_tok": 8`, "num_experts = 64: mixture-of-experts"},
		{"no experts", `"num_experts": 0, "num_local_experts": null`, ""},
		{"local experts", `"num_local_experts": 8`, "num_local_experts = 8"},
		{"experts per token", `"num_experts_per_tok": 2`, "num_experts_per_tok = 2"},
		{"routed experts", `"n_routed_experts": 64`, "n_routed_experts = 64"},
		{"moe size", `"moe_intermediate_size": 768`, "moe_intermediate_size = 768"},
		{"shared expert", `"shared_expert_intermediate_size": 5632`, "shared_expert_intermediate_size = 5632"},
		{"quantized", "\"quantization_config\": {\n  \"bits\": 4,\n  \"quant_method\": \"gptq\"\n}", `quantization_config = {"bits":4,"quant_method":"gptq"}`},
		{"partial rope", `"partial_rotary_factor": 0.5`, "partial_rotary_factor = 0.5"},
		{"whole rope", `"partial_rotary_factor": 1.0`, ""},
		{"moe model type", `"model_type": "qwen2_moe"`, "model_type = qwen2_moe"},
		{"mistral without a window", `"model_type": "mistral", "sliding_window": null`, ""},
		{"mistral window over the context", `"model_type": "mistral", "sliding_window": 32`, ""},
		{"mistral window", `"model_type": "mistral", "sliding_window": 16`,
			"sliding_window = 16 < max_position_embeddings 32: sliding windows are not supported; set max_position_embeddings to 16 (full attention there)"},
		{"mistral default window", `"model_type": "mistral", "max_position_embeddings": 32768`, "sliding_window = 4096 < max_position_embeddings 32768"},
		{"mistral window not a number", `"model_type": "mistral", "sliding_window": "wide"`, `sliding_window = "wide": want a positive integer or null`},
		{"qwen window off", `"sliding_window": 16`, ""},
		{"mlp bias", `"mlp_bias": true`, "mlp_bias = true"},
		{"llama o bias", `"model_type": "llama", "attention_bias": true`, "attention_bias = true"},
		{"qwen3 o bias", `"model_type": "qwen3", "attention_bias": true`, "attention_bias = true"},
		{"no scaling", `"rope_scaling": null`, ""},
		{"default scaling", scaling(`"rope_type": "default"`), ""},
		{"llama3", scaling(`"rope_type": "llama3", ` + l3), ""},
		{"llama3 as type", scaling(`"type": "llama3", ` + l3), ""},
		{"yarn", scaling(`"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768`), `rope_scaling.rope_type = "yarn": only "llama3"`},
		{"linear as type", scaling(`"type": "linear", "factor": 2.0`), `rope_scaling.rope_type = "linear"`},
		{"dynamic", scaling(`"rope_type": "dynamic", "factor": 2.0`), `rope_scaling.rope_type = "dynamic"`},
		{"no type", scaling(`"factor": 2.0`), "rope_scaling.rope_type is missing"},
		{"types disagree", scaling(`"rope_type": "llama3", "type": "linear", ` + l3), `rope_scaling.rope_type = "llama3" but rope_scaling.type = "linear"`},
		{"type not a string", scaling(`"rope_type": 3`), "rope_scaling.rope_type = 3: want a string"},
		{"not an object", `"rope_scaling": 2`, "rope_scaling = 2: want an object or null"},
		{"missing low", scaling(`"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16`), "rope_scaling.low_freq_factor is missing"},
		{"factor a string", scaling(`"rope_type": "llama3", "factor": "8", "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16`), `rope_scaling.factor = "8": want a number`},
		{"factor below 1", scaling(`"rope_type": "llama3", "factor": 0.5, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16`), "rope_scaling.factor = 0.5: must be at least 1"},
		{"low zero", scaling(`"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16`), "rope_scaling.low_freq_factor = 0: must be positive"},
		{"high not above low", scaling(`"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16`), "rope_scaling.high_freq_factor = 4: must be above low_freq_factor 4"},
		{"original zero", scaling(`"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 0`), "rope_scaling.original_max_position_embeddings = 0: must be positive"},
		{"original fractional", scaling(`"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16.5`), "rope_scaling.original_max_position_embeddings = 16.5: want an integer"},
		{"parameters disagree", scaling(`"rope_type": "llama3", `+l3) + `, "rope_parameters": {"rope_type": "llama3", "factor": 4.0,
		  "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}`, "disagrees with rope_scaling"},
	} {
		_, err := parse("{" + base + map[bool]string{true: ", ", false: ""}[tc.extra != ""] + tc.extra + "}")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "":
		case err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: error %v, want ErrInvalid containing %q", tc.name, err, tc.want)
		case strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: error %q is not one line", tc.name, err)
		}
	}
}

// TestQwenDefaults: Qwen2Config and Qwen3Config default
// num_key_value_heads to 32 when the key is absent, and Qwen3Config
// head_dim to 128; LlamaConfig uses the heads and hidden/heads.
func TestQwenDefaults(t *testing.T) {
	for _, tc := range []struct {
		modelType, extra string
		kv, head         int
	}{
		{ModelQwen2, ``, 32, 16},
		{ModelQwen2, `, "num_key_value_heads": null`, 4, 16},
		{ModelQwen3, ``, 32, 128},
		{ModelQwen3, `, "num_key_value_heads": 2, "head_dim": 24`, 2, 24},
		{ModelLlama, ``, 4, 16},
		{ModelMistral, `, "sliding_window": null`, 8, 16},
	} {
		var c LlamaConfig
		doc := `{"model_type": "` + tc.modelType + `", "hidden_size": 64, "num_attention_heads": 4` + tc.extra + `}`
		if err := json.Unmarshal([]byte(doc), &c); err != nil {
			t.Fatal(err)
		}
		if c.NumKeyValueHeads != tc.kv || c.HeadDim != tc.head {
			t.Errorf("%s: num_key_value_heads %d, head_dim %d; want %d, %d", doc, c.NumKeyValueHeads, c.HeadDim, tc.kv, tc.head)
		}
	}
}

// TestWriteReadArchRoundTrip: a Qwen2, a Qwen3, a scaled-RoPE Llama and a Mistral
// config are written with their model type's keys and read back equal.
func TestWriteReadArchRoundTrip(t *testing.T) {
	qwen2 := New(151936, 896, 4864, 24, 14, 32768, true)
	qwen2.SetModelType(ModelQwen2)
	qwen2.NumKeyValueHeads, qwen2.RopeTheta = 2, 1e6
	q3 := New(151936, 1024, 3072, 28, 16, 40960, true)
	q3.SetModelType(ModelQwen3)
	q3.NumKeyValueHeads, q3.HeadDim = 8, 128
	l32 := New(128256, 2048, 8192, 16, 32, 131072, true)
	l32.NumKeyValueHeads, l32.RopeTheta = 8, 500000
	l32.RopeScaling = &RopeScaling{RopeType: RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	mistral := New(32768, 4096, 14336, 32, 32, 32768, false)
	mistral.SetModelType(ModelMistral)
	mistral.NumKeyValueHeads, mistral.RopeTheta = 8, 1e6
	for _, tc := range []struct {
		want    LlamaConfig
		arch    string
		keys    map[string]any // nil value: the key must be absent
		literal string         // must appear in the file as written
	}{
		{qwen2, "Qwen2ForCausalLM", map[string]any{"use_sliding_window": false, "attention_bias": nil, "mlp_bias": nil, "rope_scaling": nil}, `"rope_scaling": null`},
		{q3, "Qwen3ForCausalLM", map[string]any{"use_sliding_window": false, "attention_bias": false, "mlp_bias": nil, "head_dim": 128.0}, `"head_dim": 128`},
		{l32, "LlamaForCausalLM", map[string]any{"use_sliding_window": nil, "attention_bias": false, "mlp_bias": false}, `"factor": 32.0`},
		{mistral, "MistralForCausalLM", map[string]any{"use_sliding_window": nil, "attention_bias": nil, "mlp_bias": nil}, `"sliding_window": null`},
	} {
		dir := t.TempDir()
		if err := Write(dir, tc.want); err != nil {
			t.Fatal(err)
		}
		got, err := Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: round trip = %+v\nwant %+v", tc.arch, got, tc.want)
		}
		b, _ := os.ReadFile(filepath.Join(dir, FileName))
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if a, _ := m["architectures"].([]any); len(a) != 1 || a[0] != tc.arch || m["model_type"] != tc.want.ModelType {
			t.Errorf("%s: architectures %v, model_type %v", tc.arch, m["architectures"], m["model_type"])
		}
		for key, val := range tc.keys {
			if v, ok := m[key]; (val == nil && ok && key != "rope_scaling") || (val != nil && !reflect.DeepEqual(v, val)) {
				t.Errorf("%s: config.json %s = %v (present %t), want %v", tc.arch, key, v, ok, val)
			}
		}
		if !strings.Contains(string(b), tc.literal) {
			t.Errorf("%s: config.json lacks %s:\n%s", tc.arch, tc.literal, b)
		}
	}
}
