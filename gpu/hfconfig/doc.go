// Package hfconfig reads, validates and writes the Hugging Face config.json
// of a Llama checkpoint (LlamaConfig keys), so mgrpo checkpoints load in
// transformers and HF Llama checkpoints (e.g. SmolLM2-135M) load here.
//
// Keys missing from a file get the transformers defaults that matter to the
// model (num_key_value_heads = num_attention_heads, head_dim = hidden_size /
// num_attention_heads, rope_theta 10000, rms_norm_eps 1e-6); a theta under
// transformers 5's rope_parameters is read as rope_theta. Token ids that
// are null in the file are -1 here; an eos_token_id list keeps its first
// entry in EOSTokenID and all entries in EOSTokenIDs.
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
