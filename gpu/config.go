package gpu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mgrpo/mgrpo/gpu/hfconfig"
)

// ErrBadConfig is returned (wrapped) for a model configuration that cannot
// describe a Llama decoder.
var ErrBadConfig = errors.New("gpu: bad model config")

// Decoder families (Config.Arch), named by Hugging Face's model_type.
const (
	ArchLlama = hfconfig.ModelLlama // DESIGN §4; also the empty Arch
	ArchQwen2 = hfconfig.ModelQwen2 // biases on q, k and v (QKVBias)
	ArchQwen3 = hfconfig.ModelQwen3 // RMSNorm over each query and key head (QKNorm)
	// ArchMistral is Llama's maths (its sliding window read only where it
	// spans the context: hfconfig.ModelMistral), saved as model_type
	// mistral.
	ArchMistral = hfconfig.ModelMistral
)

// Config gives the dimensions of the Llama decoder (DESIGN §4), or of a
// Qwen2 or Qwen3 one (Arch).
type Config struct {
	// Vocab is the number of token ids (the tokenizer's VocabSize).
	Vocab int `json:"vocab"`
	// Hidden is the residual width D.
	Hidden int `json:"hidden"`
	// Layers is the number of decoder blocks L.
	Layers int `json:"layers"`
	// Heads is the number of query heads H; the head dimension is Hidden/Heads.
	Heads int `json:"heads"`
	// KVHeads is the number of key/value heads G; it divides Heads (G = H is
	// plain multi-head attention, G < H is grouped-query attention).
	KVHeads int `json:"kv_heads"`
	// MLP is the SwiGLU intermediate width M.
	MLP int `json:"mlp"`
	// Context is the longest sequence (prompt plus completion) in tokens.
	Context int `json:"context"`
	// RopeTheta is the RoPE base; Hugging Face's default is 10000.
	RopeTheta float64 `json:"rope_theta"`
	// NormEps is the RMSNorm epsilon; 1e-6 as in DESIGN §4.
	NormEps float64 `json:"norm_eps"`
	// TieEmbeddings makes lm_head share the token-embedding matrix.
	TieEmbeddings bool `json:"tie_embeddings"`
	// Arch is the decoder family: "" or ArchLlama, ArchQwen2, ArchQwen3 or
	// ArchMistral.
	Arch string `json:"arch,omitempty"`
	// HeadWidth is the per-head width E when it is not Hidden/Heads (as
	// Qwen3's head_dim may be); 0 means Hidden/Heads. HeadDim returns E.
	HeadWidth int `json:"head_width,omitempty"`
	// RopeScaling is Llama 3.x's RoPE frequency scaling; zero for none.
	RopeScaling RopeScaling `json:"rope_scaling,omitzero"`
}

// Vocabulary size and context length of the presets: the built-in character
// tokenizer (PAD, BOS, EOS and printable ASCII) and DESIGN §4's context.
const (
	PresetVocab   = 98
	PresetContext = 64
)

// Presets lists the preset names in increasing size.
var presetNames = []string{"tiny", "small", "base", "smollm2-135m", "qwen2.5-0.5b"}

// PresetNames returns the names of the presets, smallest first (Preset
// also accepts each Llama one with an architecture prefix).
func PresetNames() []string { return append([]string(nil), presetNames...) }

// Preset returns the configuration of a named preset (DESIGN §4 table):
//
//	tiny  hidden 32,  2 layers, 2 heads, 2 kv heads, MLP 64
//	small hidden 64,  2 layers, 4 heads, 4 kv heads, MLP 192
//	base  hidden 128, 4 layers, 4 heads, 4 kv heads, MLP 384
//
// all with vocabulary 98, context 64, theta 10000, eps 1e-6 and an untied
// head. A Llama preset's name prefixed by "qwen2-" or "qwen3-" (qwen3-base)
// is the same shape as a Qwen2 model (q/k/v biases) or a Qwen3 one (q/k
// norms): the Qwen-shaped benchmarks (`mgrpo-node bench --preset
// qwen3-base`). For benchmarks at the sizes people train (random weights),
// two released models, context 2048 and a tied head:
//
//	smollm2-135m  SmolLM2-135M (a Llama): vocabulary 49152, hidden 576,
//	              30 layers, 9 heads, 3 kv heads, MLP 1536, theta 1e5, eps 1e-5
//	qwen2.5-0.5b  Qwen2.5-0.5B (a Qwen2: q/k/v biases): vocabulary 151936,
//	              hidden 896, 24 layers, 14 heads, 2 kv heads, MLP 4864,
//	              theta 1e6, eps 1e-6
func Preset(name string) (Config, error) {
	if arch, size, ok := strings.Cut(name, "-"); ok && (arch == ArchQwen2 || arch == ArchQwen3) {
		c, err := Preset(size)
		if err == nil && c.Arch != "" {
			err = fmt.Errorf("%w: preset %q is a %s model already", ErrBadConfig, size, c.Arch)
		}
		if err != nil {
			return Config{}, fmt.Errorf("%w (after the prefix %s-)", err, arch)
		}
		c.Arch = arch
		return c, nil
	}
	c := Config{Vocab: PresetVocab, Context: PresetContext, RopeTheta: 10000, NormEps: 1e-6}
	switch name {
	case "tiny":
		c.Hidden, c.Layers, c.Heads, c.KVHeads, c.MLP = 32, 2, 2, 2, 64
	case "small":
		c.Hidden, c.Layers, c.Heads, c.KVHeads, c.MLP = 64, 2, 4, 4, 192
	case "base":
		c.Hidden, c.Layers, c.Heads, c.KVHeads, c.MLP = 128, 4, 4, 4, 384
	case "smollm2-135m":
		c = Config{Vocab: 49152, Hidden: 576, Layers: 30, Heads: 9, KVHeads: 3, MLP: 1536, Context: 2048, RopeTheta: 1e5, NormEps: 1e-5, TieEmbeddings: true}
	case "qwen2.5-0.5b":
		c = Config{Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, MLP: 4864, Context: 2048, RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: ArchQwen2}
	default:
		return Config{}, fmt.Errorf("%w: unknown preset %q (want one of %v, or a Llama one after qwen2- or qwen3-)", ErrBadConfig, name, presetNames)
	}
	return c, nil
}

// Upper bounds of Validate: those of hfconfig (far above any released
// Llama), and at most MaxParams weights, so that every buffer size is an
// int and no allocation asks for an impossible length.
const (
	MaxVocab   = hfconfig.MaxVocabSize // vocab
	MaxDim     = hfconfig.MaxDim       // hidden, heads, kv_heads, mlp
	MaxLayers  = hfconfig.MaxLayers    // layers
	MaxContext = hfconfig.MaxPositions // context
	MaxParams  = 1 << 38               // scalar weights: 1 TiB of float32
)

// HeadDim is the per-head width E: HeadWidth if set, else Hidden/Heads.
func (c Config) HeadDim() int {
	if c.HeadWidth > 0 {
		return c.HeadWidth
	}
	return c.Hidden / c.Heads
}

// headDim is HeadDim, defined for any dimensions (the estimates').
func (c Config) headDim() int {
	if c.HeadWidth > 0 {
		return c.HeadWidth
	}
	return c.Hidden / max(c.Heads, 1)
}

// QKVBias reports whether the q, k and v projections have biases (Qwen2):
// q_proj.bias [H·E], k_proj.bias and v_proj.bias [G·E].
func (c Config) QKVBias() bool { return c.Arch == ArchQwen2 }

// QKNorm reports whether each query and key head is RMSNormed (weights
// q_norm, k_norm [E], eps NormEps) after the projection and before RoPE
// (Qwen3).
func (c Config) QKNorm() bool { return c.Arch == ArchQwen3 }

// Validate reports the first dimension that cannot describe a Llama decoder.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, a...)...)
	}
	switch {
	case c.Vocab < 1:
		return bad("vocab = %d: must be at least 1", c.Vocab)
	case c.Hidden < 1, c.Layers < 1, c.Heads < 1, c.KVHeads < 1, c.MLP < 1, c.Context < 2:
		return bad("hidden %d, layers %d, heads %d, kv_heads %d, mlp %d must be ≥ 1 and context %d ≥ 2",
			c.Hidden, c.Layers, c.Heads, c.KVHeads, c.MLP, c.Context)
	}
	if err := c.checkBounds(); err != nil {
		return bad("%v", err)
	}
	switch {
	case c.Arch != "" && c.Arch != ArchLlama && c.Arch != ArchQwen2 && c.Arch != ArchQwen3 && c.Arch != ArchMistral:
		return bad("arch = %q: want %q, %q, %q or %q", c.Arch, ArchLlama, ArchQwen2, ArchQwen3, ArchMistral)
	case c.HeadWidth < 0:
		return bad("head_width = %d: must be ≥ 0 (0: hidden/heads)", c.HeadWidth)
	case c.HeadWidth == 0 && c.Hidden%c.Heads != 0:
		return bad("hidden = %d is not a multiple of heads = %d", c.Hidden, c.Heads)
	case c.Heads%c.KVHeads != 0:
		return bad("heads = %d is not a multiple of kv_heads = %d", c.Heads, c.KVHeads)
	case c.HeadDim()%2 != 0:
		return bad("head dim = %d must be even for RoPE", c.HeadDim())
	case !(c.RopeTheta > 0):
		return bad("rope_theta = %g: must be > 0", c.RopeTheta)
	case !(c.NormEps > 0):
		return bad("norm_eps = %g: must be > 0", c.NormEps)
	}
	if err := c.RopeScaling.validate(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// checkBounds reports the first size above its upper bound, then a weight
// count above MaxParams (counted in float64: no overflow).
func (c Config) checkBounds() error {
	for _, b := range []struct {
		key      string
		val, max int
	}{
		{"vocab", c.Vocab, MaxVocab}, {"hidden", c.Hidden, MaxDim}, {"layers", c.Layers, MaxLayers},
		{"heads", c.Heads, MaxDim}, {"kv_heads", c.KVHeads, MaxDim}, {"mlp", c.MLP, MaxDim}, {"head_width", c.HeadWidth, MaxDim},
		{"context", c.Context, MaxContext},
	} {
		if b.val > b.max {
			return fmt.Errorf("%s = %d: must be at most %d", b.key, b.val, b.max)
		}
	}
	if p := c.params(); p > MaxParams {
		return fmt.Errorf("%.4g weights (%s of float32) exceed the limit of %d (%s)", p, formatBytes(4*p), int64(MaxParams), formatBytes(4*MaxParams))
	}
	return nil
}

// params is NumParams in float64, safe for any dimensions.
func (c Config) params() float64 {
	d, m, v := float64(c.Hidden), float64(c.MLP), float64(c.Vocab)
	e := float64(c.headDim())
	perLayer := 2*d + d*float64(c.Heads+2*c.KVHeads)*e + float64(c.Heads)*e*d + 3*d*m
	if c.QKVBias() {
		perLayer += float64(c.Heads+2*c.KVHeads) * e
	}
	if c.QKNorm() {
		perLayer += 2 * e
	}
	p := v*d + float64(c.Layers)*perLayer + d
	if !c.TieEmbeddings {
		p += v * d
	}
	return p
}

// NumParams is the number of scalar weights (a tied head counted once).
func (c Config) NumParams() int { return newLayout(c).size }

// FlopsPerToken estimates the forward FLOPs per token at sequence length t:
// 2 per weight multiply-add in every matrix product plus the attention
// products (QKᵀ and PV over t keys).
func (c Config) FlopsPerToken(t int) float64 {
	d, e, h, g, m := c.Hidden, c.HeadDim(), c.Heads, c.KVHeads, c.MLP
	perLayer := d*(h+2*g)*e + h*e*d + 3*d*m
	mat := c.Layers*perLayer + c.Vocab*d
	att := c.Layers * 2 * h * e * t
	return 2 * float64(mat+att)
}
