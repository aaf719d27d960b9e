package hfconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// FileName is the config file inside a checkpoint directory.
const FileName = "config.json"

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("hfconfig: invalid config")

// Upper bounds Validate puts on the sizes, far above any Llama released
// (Llama 3.1 405B: vocabulary 128256, hidden 16384, MLP 53248, 126 layers,
// 128 heads, context 131072) and low enough that the products sizing the
// model's buffers cannot overflow.
const (
	// MaxVocabSize bounds vocab_size.
	MaxVocabSize = 1 << 22
	// MaxDim bounds hidden_size, intermediate_size, the head counts and
	// head_dim.
	MaxDim = 1 << 20
	// MaxLayers bounds num_hidden_layers.
	MaxLayers = 1024
	// MaxPositions bounds max_position_embeddings.
	MaxPositions = 1 << 17
)

// LlamaConfig is the transformers config of a Llama-family decoder
// (LlamaConfig, Qwen2Config, Qwen3Config or MistralConfig), with the JSON keys of
// config.json.
type LlamaConfig struct {
	// Architectures is ["LlamaForCausalLM"] (or the Qwen and Mistral
	// classes, CausalLM).
	Architectures []string `json:"architectures"`
	// ModelType is "llama", "qwen2", "qwen3" or "mistral" (ModelLlama,
	// ModelQwen2, ModelQwen3, ModelMistral).
	ModelType string `json:"model_type"`
	// VocabSize is the number of token ids (rows of embed_tokens).
	VocabSize int `json:"vocab_size"`
	// HiddenSize is the residual width d.
	HiddenSize int `json:"hidden_size"`
	// IntermediateSize is the SwiGLU MLP width.
	IntermediateSize int `json:"intermediate_size"`
	// NumHiddenLayers is the number of decoder blocks.
	NumHiddenLayers int `json:"num_hidden_layers"`
	// NumAttentionHeads is the number of query heads.
	NumAttentionHeads int `json:"num_attention_heads"`
	// NumKeyValueHeads is the number of key/value heads (grouped-query
	// attention when smaller than NumAttentionHeads).
	NumKeyValueHeads int `json:"num_key_value_heads"`
	// HeadDim is the per-head width: HiddenSize/NumAttentionHeads unless
	// the file says otherwise (Qwen3's default is 128).
	HeadDim int `json:"head_dim"`
	// MaxPositionEmbeddings is the longest sequence (prompt + completion).
	MaxPositionEmbeddings int `json:"max_position_embeddings"`
	// RMSNormEps is the epsilon inside every RMSNorm.
	RMSNormEps float64 `json:"rms_norm_eps"`
	// RopeTheta is the RoPE base frequency.
	RopeTheta float64 `json:"rope_theta"`
	// RopeScaling is Llama 3.x's RoPE frequency scaling, nil for none (a
	// rope_scaling of null or of rope_type "default"); other scalings are
	// refused (rope.go).
	RopeScaling *RopeScaling `json:"-"`
	// RopeParameters is where transformers 5 writes RoPE's settings
	// ({"rope_theta": θ, "rope_type": "default"}); when present its theta
	// is RopeTheta and its llama3 scaling RopeScaling, and any other
	// rope_type is refused.
	RopeParameters json.RawMessage `json:"rope_parameters,omitempty"`
	// TieWordEmbeddings makes lm_head share embed_tokens' weight.
	TieWordEmbeddings bool `json:"tie_word_embeddings"`
	// HiddenAct is the MLP activation; only "silu" is supported.
	HiddenAct string `json:"hidden_act"`
	// BOSTokenID is the begin-of-sequence id, -1 if null.
	BOSTokenID int `json:"-"`
	// EOSTokenID is the (first) end-of-sequence id, -1 if null.
	EOSTokenID int `json:"-"`
	// EOSTokenIDs holds every id of an eos_token_id list (nil for a single id).
	EOSTokenIDs []int `json:"-"`
	// PadTokenID is the padding id, -1 if null.
	PadTokenID int `json:"-"`
	// TorchDtype is the dtype of the weights file, "float32" for mgrpo's own.
	TorchDtype string `json:"torch_dtype"`
	// AttentionBias must be false for Llama and Qwen3 (it would put a
	// bias on o_proj); Qwen2 ignores it, as transformers does (its q, k
	// and v always have biases, its o_proj never).
	AttentionBias bool `json:"attention_bias"`
	// MLPBias must be false (no biases in the MLP).
	MLPBias bool `json:"mlp_bias"`
}

// rawKeys holds the keys whose JSON form the struct cannot take as is:
// ids that may be null or (for eos_token_id) a list, and rope_scaling.
type rawKeys struct {
	BOS         json.RawMessage `json:"bos_token_id"`
	EOS         json.RawMessage `json:"eos_token_id"`
	Pad         json.RawMessage `json:"pad_token_id"`
	RopeScaling json.RawMessage `json:"rope_scaling"`
}

// New returns a float32 Llama config with the given sizes and the defaults
// of DESIGN §4 (RMSNorm eps 1e-6, RoPE theta 10000, no biases, silu), with
// NumKeyValueHeads = heads and HeadDim = hidden/heads. Call Validate.
func New(vocab, hidden, intermediate, layers, heads, maxPos int, tied bool) LlamaConfig {
	c := LlamaConfig{
		Architectures: []string{CausalLM(ModelLlama)}, ModelType: ModelLlama,
		VocabSize: vocab, HiddenSize: hidden, IntermediateSize: intermediate,
		NumHiddenLayers: layers, NumAttentionHeads: heads, NumKeyValueHeads: heads,
		MaxPositionEmbeddings: maxPos, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieWordEmbeddings: tied, HiddenAct: "silu", TorchDtype: "float32",
		BOSTokenID: -1, EOSTokenID: -1, PadTokenID: -1,
	}
	if heads > 0 {
		c.HeadDim = hidden / heads
	}
	return c
}

// UnmarshalJSON decodes config.json, accepting null/list token ids and
// filling transformers defaults for missing keys (package doc). A key
// that would change the model's maths in a way not implemented (a sliding
// window, experts, a scaled RoPE other than llama3: checkKeys) is refused
// here, by name.
func (c *LlamaConfig) UnmarshalJSON(b []byte) error {
	type plain LlamaConfig // no methods: avoids recursion
	var p plain
	var ids rawKeys
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &ids); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	*c = LlamaConfig(p)
	if err := checkKeys(keys); err != nil {
		return err
	}
	if err := c.checkWindow(keys); err != nil {
		return err
	}
	var err error
	if c.RopeScaling, err = parseRopeScaling("rope_scaling", ids.RopeScaling); err != nil {
		return err
	}
	if c.BOSTokenID, _, err = decodeID("bos_token_id", ids.BOS); err != nil {
		return err
	}
	if c.EOSTokenID, c.EOSTokenIDs, err = decodeID("eos_token_id", ids.EOS); err != nil {
		return err
	}
	if c.PadTokenID, _, err = decodeID("pad_token_id", ids.Pad); err != nil {
		return err
	}
	if err := c.readRopeParameters(); err != nil {
		return err
	}
	c.fillDefaults(keys)
	return nil
}

// readRopeParameters takes rope_theta and a llama3 scaling from
// rope_parameters when the config has them (transformers 5), so such a
// checkpoint does not silently get the default θ or no scaling.
func (c *LlamaConfig) readRopeParameters() error {
	if len(c.RopeParameters) == 0 || string(c.RopeParameters) == "null" {
		return nil
	}
	var rp struct {
		Theta float64 `json:"rope_theta"`
	}
	if err := json.Unmarshal(c.RopeParameters, &rp); err != nil {
		return fmt.Errorf("%w: rope_parameters = %s: %v", ErrInvalid, compact(c.RopeParameters), err)
	}
	s, err := parseRopeScaling("rope_parameters", c.RopeParameters)
	switch {
	case err != nil:
		return err
	case s != nil && c.RopeScaling == nil:
		c.RopeScaling = s
	case s != nil && *s != *c.RopeScaling:
		return fmt.Errorf("%w: rope_parameters = %s: disagrees with rope_scaling", ErrInvalid, compact(c.RopeParameters))
	}
	switch {
	case rp.Theta == 0:
	case c.RopeTheta == 0:
		c.RopeTheta = rp.Theta
	case c.RopeTheta != rp.Theta:
		return fmt.Errorf("%w: rope_theta = %g but rope_parameters.rope_theta = %g", ErrInvalid, c.RopeTheta, rp.Theta)
	}
	return nil
}

// MarshalJSON encodes config.json; -1 token ids become null.
func (c LlamaConfig) MarshalJSON() ([]byte, error) {
	type plain LlamaConfig
	type out struct { // its own keys hide plain's of the same name
		plain
		AttentionBias    any `json:"attention_bias,omitempty"`
		MLPBias          any `json:"mlp_bias,omitempty"`
		UseSlidingWindow any `json:"use_sliding_window,omitempty"`
		SlidingWindow    any `json:"sliding_window,omitempty"`
		RopeScaling      any `json:"rope_scaling"`
		BOS              any `json:"bos_token_id"`
		EOS              any `json:"eos_token_id"`
		Pad              any `json:"pad_token_id"`
	}
	o := out{plain: plain(c), BOS: idOrNull(c.BOSTokenID), EOS: idOrNull(c.EOSTokenID), Pad: idOrNull(c.PadTokenID)}
	if len(c.EOSTokenIDs) > 0 {
		o.EOS = c.EOSTokenIDs
	}
	if c.RopeScaling != nil {
		o.RopeScaling = c.RopeScaling
	}
	o.AttentionBias, o.MLPBias, o.UseSlidingWindow, o.SlidingWindow = c.biasKeys()
	return json.Marshal(o)
}

func idOrNull(id int) any {
	if id < 0 {
		return nil
	}
	return id
}

// decodeID reads a token id that may be absent, null, a number or a list.
func decodeID(key string, raw json.RawMessage) (int, []int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return -1, nil, nil
	}
	var id int
	if err := json.Unmarshal(raw, &id); err == nil {
		return id, nil, nil
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return 0, nil, fmt.Errorf("%s = %s: want an integer, a non-empty list or null", key, raw)
	}
	return list[0], list, nil
}

// fillDefaults applies the transformers defaults for keys absent (zero).
// Qwen2Config and Qwen3Config default num_key_value_heads to 32 when the
// key is absent (to num_attention_heads when it is null), MistralConfig to
// 8, and Qwen3Config head_dim to 128.
func (c *LlamaConfig) fillDefaults(keys map[string]json.RawMessage) {
	if _, ok := keys["num_key_value_heads"]; !ok && (c.ModelType == ModelQwen2 || c.ModelType == ModelQwen3) {
		c.NumKeyValueHeads = qwenKVHeads
	}
	if _, ok := keys["num_key_value_heads"]; !ok && c.ModelType == ModelMistral {
		c.NumKeyValueHeads = mistralKVHeads
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.HeadDim == 0 && c.ModelType == ModelQwen3 {
		c.HeadDim = qwen3HeadDim
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
	}
}

// Validate checks what the model relies on and returns one error naming
// the first offending key and its value.
func (c LlamaConfig) Validate() error {
	bad := func(key string, val any, why string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrInvalid, key, val, why)
	}
	sizes := []struct {
		key      string
		val, max int
	}{
		{"vocab_size", c.VocabSize, MaxVocabSize}, {"hidden_size", c.HiddenSize, MaxDim},
		{"intermediate_size", c.IntermediateSize, MaxDim}, {"num_hidden_layers", c.NumHiddenLayers, MaxLayers},
		{"num_attention_heads", c.NumAttentionHeads, MaxDim}, {"num_key_value_heads", c.NumKeyValueHeads, MaxDim},
		{"head_dim", c.HeadDim, MaxDim}, {"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositions},
	}
	for _, p := range sizes {
		if p.val <= 0 {
			return bad(p.key, p.val, "must be positive")
		}
		if p.val > p.max {
			return bad(p.key, p.val, fmt.Sprintf("must be at most %d", p.max))
		}
	}
	switch {
	case CausalLM(c.ModelType) == "":
		return bad("model_type", c.ModelType, `want "llama", "qwen2", "qwen3" or "mistral"`)
	case c.HiddenSize%c.NumAttentionHeads != 0 && c.HeadDim == c.HiddenSize/c.NumAttentionHeads:
		return bad("hidden_size", c.HiddenSize, fmt.Sprintf("not divisible by num_attention_heads %d", c.NumAttentionHeads))
	case c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return bad("num_attention_heads", c.NumAttentionHeads, fmt.Sprintf("not divisible by num_key_value_heads %d", c.NumKeyValueHeads))
	case !(c.RMSNormEps > 0):
		return bad("rms_norm_eps", c.RMSNormEps, "must be positive")
	case !(c.RopeTheta > 0):
		return bad("rope_theta", c.RopeTheta, "must be positive")
	case c.HiddenAct != "silu":
		return bad("hidden_act", c.HiddenAct, `only "silu" is supported`)
	case c.AttentionBias && c.ModelType != ModelQwen2:
		return bad("attention_bias", true, "a bias on o_proj is not supported")
	case c.MLPBias:
		return bad("mlp_bias", true, "biases in the MLP are not supported")
	}
	if c.RopeScaling != nil {
		if err := c.RopeScaling.validate("rope_scaling"); err != nil {
			return err
		}
	}
	for _, id := range []struct {
		key string
		val int
	}{{"bos_token_id", c.BOSTokenID}, {"eos_token_id", c.EOSTokenID}, {"pad_token_id", c.PadTokenID}} {
		if id.val >= c.VocabSize {
			return bad(id.key, id.val, fmt.Sprintf("not below vocab_size %d", c.VocabSize))
		}
	}
	return nil
}

// Read reads and validates dir/config.json.
func Read(dir string) (LlamaConfig, error) {
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return LlamaConfig{}, fmt.Errorf("read config: %w", err)
	}
	var c LlamaConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return LlamaConfig{}, fmt.Errorf("read config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return LlamaConfig{}, fmt.Errorf("read config %s: %w", path, err)
	}
	return c, nil
}

// Write validates c and writes dir/config.json atomically (temp file,
// fsync, rename, fsync dir), indented with two spaces as transformers does.
func Write(dir string, c LlamaConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("write config %s: %w", dir, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("write config %s: %w", dir, err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("write config %s: %w", dir, err)
	}
	out.WriteByte('\n')
	if err := atomicfile.WriteBytes(filepath.Join(dir, FileName), out.Bytes()); err != nil {
		return fmt.Errorf("write config %s: %w", dir, err)
	}
	return nil
}
