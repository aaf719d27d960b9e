// Package hfconfig reads, validates and writes the Hugging Face config.json
// of a Llama-family checkpoint: LlamaConfig keys for model_type "llama",
// Qwen2Config's for "qwen2" (Qwen2, Qwen2.5), Qwen3Config's for "qwen3"
// and MistralConfig's for "mistral", so mgrpo checkpoints load in
// transformers and hub checkpoints (e.g. SmolLM2-135M, Qwen2.5-0.5B,
// Qwen3-0.6B, Llama-3.2-1B, Mistral-7B-v0.3) load here.
//
// Keys missing from a file get the transformers defaults that matter to the
// model (num_key_value_heads = num_attention_heads, or 32 for Qwen and 8
// for Mistral; head_dim
// = hidden_size / num_attention_heads, or 128 for Qwen3; rope_theta 10000,
// rms_norm_eps 1e-6); a theta or a llama3 scaling under transformers 5's
// rope_parameters is read as rope_theta and rope_scaling. Token ids that
// are null in the file are -1 here; an eos_token_id list keeps its first
// entry in EOSTokenID and all entries in EOSTokenIDs.
//
// What would change the maths in a way the model does not implement is
// refused with one error naming the key: another model_type, a
// rope_scaling other than "llama3", a sliding window (a Mistral one
// shorter than max_position_embeddings; MistralConfig's default is 4096),
// mixture-of-experts
// sizes, partial RoPE, quantized weights, a bias on o_proj or in the MLP.
// Writing keeps model_type and architectures.
//
// It imports only the standard library; it never imports the model, actors
// or messages.
//
// Example:
//
//	cfg, err := hfconfig.Read(dir) // dir/config.json
//	cfg.HiddenSize, cfg.NumHiddenLayers
//	err = hfconfig.Write(dir, cfg)
package hfconfig
