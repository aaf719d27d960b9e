package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The model types read and written (config.json's model_type).
const (
	// ModelLlama is LlamaForCausalLM: no biases, head_dim hidden/heads
	// unless given.
	ModelLlama = "llama"
	// ModelQwen2 is Qwen2ForCausalLM (Qwen2, Qwen2.5): the Llama decoder
	// with biases on the q, k and v projections (not o).
	ModelQwen2 = "qwen2"
	// ModelQwen3 is Qwen3ForCausalLM: no biases, an explicit head_dim, and
	// an RMSNorm over each query and key head (q_norm, k_norm) after the
	// projection and before RoPE.
	ModelQwen3 = "qwen3"
	// ModelMistral is MistralForCausalLM (Mistral 7B, Ministral, Nemo):
	// the Llama decoder, with a sliding window of attention
	// (sliding_window) that is read only where it covers the whole
	// context (null, or at least max_position_embeddings): there it is
	// full attention.
	ModelMistral = "mistral"
)

// Defaults of Qwen2Config, Qwen3Config and MistralConfig that differ from
// LlamaConfig's.
const (
	qwenKVHeads    = 32   // num_key_value_heads when the key is absent
	qwen3HeadDim   = 128  // Qwen3Config's head_dim
	mistralKVHeads = 8    // MistralConfig's num_key_value_heads when the key is absent
	mistralWindow  = 4096 // MistralConfig's sliding_window when the key is absent
)

// CausalLM returns the transformers class of a model type
// ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
// "MistralForCausalLM"), or "" for a model type this package does not
// read.
func CausalLM(modelType string) string {
	switch modelType {
	case ModelLlama:
		return "LlamaForCausalLM"
	case ModelQwen2:
		return "Qwen2ForCausalLM"
	case ModelQwen3:
		return "Qwen3ForCausalLM"
	case ModelMistral:
		return "MistralForCausalLM"
	}
	return ""
}

// SetModelType sets ModelType and Architectures to those of modelType
// (ModelLlama, ModelQwen2, ModelQwen3 or ModelMistral; Validate refuses
// any other).
func (c *LlamaConfig) SetModelType(modelType string) {
	c.ModelType, c.Architectures = modelType, []string{CausalLM(modelType)}
}

// biasKeys returns the values MarshalJSON writes for attention_bias,
// mlp_bias, use_sliding_window and sliding_window (nil: the key is left
// out): each model type gets the keys its transformers config has.
func (c LlamaConfig) biasKeys() (attention, mlp, useSliding, sliding any) {
	switch c.ModelType {
	case ModelQwen2: // q/k/v biases are fixed; no bias keys
		return nil, nil, false, nil
	case ModelQwen3:
		return c.AttentionBias, nil, false, nil
	case ModelMistral: // no bias keys; full attention (checkWindow)
		return nil, nil, nil, json.RawMessage("null")
	}
	return c.AttentionBias, c.MLPBias, nil, nil
}

// checkWindow reads a Mistral config's sliding_window (MistralConfig's
// 4096 when the key is absent): null, or a window at least
// max_position_embeddings, is full attention and passes; a shorter one is
// refused, with what to change.
func (c LlamaConfig) checkWindow(keys map[string]json.RawMessage) error {
	if c.ModelType != ModelMistral {
		return nil
	}
	window := mistralWindow
	if raw, ok := keys["sliding_window"]; ok {
		if string(raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw, &window); err != nil || window <= 0 {
			return fmt.Errorf("%w: sliding_window = %s: want a positive integer or null", ErrInvalid, compact(raw))
		}
	}
	if window >= c.MaxPositionEmbeddings {
		return nil
	}
	return fmt.Errorf("%w: sliding_window = %d < max_position_embeddings %d: sliding windows are not supported; set max_position_embeddings to %d (full attention there)",
		ErrInvalid, window, c.MaxPositionEmbeddings, window)
}

// checkKeys refuses, naming the first, the config.json keys that would
// change the model's maths in a way not implemented here: a sliding
// window (use_sliding_window true, a layer_types entry other than
// "full_attention"), mixture-of-experts sizes, partial RoPE and
// quantized weights. Absent, null, false, zero and empty values pass.
func checkKeys(keys map[string]json.RawMessage) error {
	bad := func(key string, raw json.RawMessage, why string) error {
		return fmt.Errorf("%w: %s = %s: %s", ErrInvalid, key, compact(raw), why)
	}
	for _, k := range []struct{ key, why string }{
		{"use_sliding_window", "sliding-window attention is not supported"},
		{"num_experts", "mixture-of-experts models are not supported"},
		{"num_local_experts", "mixture-of-experts models are not supported"},
		{"num_experts_per_tok", "mixture-of-experts models are not supported"},
		{"n_routed_experts", "mixture-of-experts models are not supported"},
		{"n_shared_experts", "mixture-of-experts models are not supported"},
		{"moe_intermediate_size", "mixture-of-experts models are not supported"},
		{"shared_expert_intermediate_size", "mixture-of-experts models are not supported"},
		{"quantization_config", "quantized checkpoints are not supported"},
	} {
		if raw, ok := keys[k.key]; ok && isSet(raw) {
			return bad(k.key, raw, k.why)
		}
	}
	if raw, ok := keys["partial_rotary_factor"]; ok && string(raw) != "null" {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || f != 1 {
			return bad("partial_rotary_factor", raw, "only RoPE over the whole head (1) is supported")
		}
	}
	if raw, ok := keys["layer_types"]; ok && string(raw) != "null" {
		var types []string
		if err := json.Unmarshal(raw, &types); err != nil {
			return bad("layer_types", raw, "want a list of strings")
		}
		for i, t := range types {
			if t != "full_attention" {
				return fmt.Errorf("%w: layer_types[%d] = %q: only full attention is supported", ErrInvalid, i, t)
			}
		}
	}
	return nil
}

// isSet reports whether a JSON value is other than null, false, 0, "",
// [] or {}.
func isSet(raw json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return true // not JSON: let the caller name it
	}
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// compact returns raw on one line (config.json is usually indented).
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
