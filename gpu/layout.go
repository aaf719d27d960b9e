package gpu

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// tensorSpec places one Hugging Face tensor inside the flat weight buffer.
type tensorSpec struct {
	Name   string
	Shape  []int // [out, in] for matrices, [n] for norm weights and biases
	Offset int
	Norm   bool // RMSNorm weight: initialised to ones
	Bias   bool // bias vector: initialised to zeros
}

// NoDecay reports whether AdamW leaves the tensor out of weight decay:
// norm weights and biases, as the Hugging Face trainer does.
func (s tensorSpec) NoDecay() bool { return s.Norm || s.Bias }

// Size is the number of elements of the tensor.
func (s tensorSpec) Size() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// layout is the order of all weights in one flat buffer. Per layer the q, k
// and v projections are adjacent (one [(H+2G)·E, D] matrix, one matrix
// product) and so are gate and up ([2M, D]); the names stay Hugging Face's.
// The tensors of the other architectures follow v_proj.weight, before
// o_proj.weight: Qwen2's q_proj.bias, k_proj.bias, v_proj.bias (adjacent:
// one [(H+2G)·E] vector, the qkv product's bias), then Qwen3's
// q_norm.weight, k_norm.weight ([E] each, adjacent). A Llama layout has
// neither, and is the same as before they existed.
type layout struct {
	specs []tensorSpec
	index map[string]int
	size  int
}

func newLayout(c Config) layout {
	var l layout
	l.index = map[string]int{}
	add := func(name string, norm bool, shape ...int) {
		s := tensorSpec{Name: name, Shape: shape, Offset: l.size, Norm: norm, Bias: strings.HasSuffix(name, ".bias")}
		l.index[name] = len(l.specs)
		l.specs = append(l.specs, s)
		l.size += s.Size()
	}
	d, e, h, g, m := c.Hidden, c.HeadDim(), c.Heads, c.KVHeads, c.MLP
	add("model.embed_tokens.weight", false, c.Vocab, d)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", true, d)
		add(p+"self_attn.q_proj.weight", false, h*e, d)
		add(p+"self_attn.k_proj.weight", false, g*e, d)
		add(p+"self_attn.v_proj.weight", false, g*e, d)
		if c.QKVBias() {
			add(p+"self_attn.q_proj.bias", false, h*e)
			add(p+"self_attn.k_proj.bias", false, g*e)
			add(p+"self_attn.v_proj.bias", false, g*e)
		}
		if c.QKNorm() {
			add(p+"self_attn.q_norm.weight", true, e)
			add(p+"self_attn.k_norm.weight", true, e)
		}
		add(p+"self_attn.o_proj.weight", false, d, h*e)
		add(p+"post_attention_layernorm.weight", true, d)
		add(p+"mlp.gate_proj.weight", false, m, d)
		add(p+"mlp.up_proj.weight", false, m, d)
		add(p+"mlp.down_proj.weight", false, d, m)
	}
	add("model.norm.weight", true, d)
	if !c.TieEmbeddings {
		add("lm_head.weight", false, c.Vocab, d)
	}
	return l
}

func (l layout) tensor(name string) tensorSpec { return l.specs[l.index[name]] }

// layerParams are one decoder block's weights (or their gradients), each a
// sub-slice of the flat buffer.
type layerParams[F Float] struct {
	attnNorm []F // [D]
	qkv      []F // [(H+2G)·E, D]: q_proj, k_proj, v_proj stacked
	qkvBias  []F // [(H+2G)·E]: q_proj, k_proj, v_proj biases stacked (Config.QKVBias), else nil
	qNorm    []F // [E]: q_norm, one RMSNorm weight shared by every query head (Config.QKNorm), else nil
	kNorm    []F // [E]: k_norm, likewise for the key heads; follows qNorm in the buffer
	o        []F // [D, H·E]
	mlpNorm  []F // [D]
	gateUp   []F // [2M, D]: gate_proj, up_proj stacked
	down     []F // [D, M]
}

// params views a flat buffer as named weights; gradients use the same view.
type params[F Float] struct {
	flat   []F
	embed  []F // [V, D]
	layers []layerParams[F]
	norm   []F // [D]
	head   []F // [V, D]; aliases embed when tied
}

func bindParams[F Float](c Config, flat []F) params[F] {
	l := newLayout(c)
	if len(flat) != l.size {
		panic(fmt.Sprintf("gpu: weight buffer has %d elements, config needs %d", len(flat), l.size))
	}
	span := func(first, last string) []F {
		a, b := l.tensor(first), l.tensor(last)
		return flat[a.Offset : b.Offset+b.Size()]
	}
	p := params[F]{flat: flat}
	p.embed = span("model.embed_tokens.weight", "model.embed_tokens.weight")
	for i := 0; i < c.Layers; i++ {
		n := fmt.Sprintf("model.layers.%d.", i)
		lp := layerParams[F]{
			attnNorm: span(n+"input_layernorm.weight", n+"input_layernorm.weight"),
			qkv:      span(n+"self_attn.q_proj.weight", n+"self_attn.v_proj.weight"),
			o:        span(n+"self_attn.o_proj.weight", n+"self_attn.o_proj.weight"),
			mlpNorm:  span(n+"post_attention_layernorm.weight", n+"post_attention_layernorm.weight"),
			gateUp:   span(n+"mlp.gate_proj.weight", n+"mlp.up_proj.weight"),
			down:     span(n+"mlp.down_proj.weight", n+"mlp.down_proj.weight"),
		}
		if c.QKVBias() {
			lp.qkvBias = span(n+"self_attn.q_proj.bias", n+"self_attn.v_proj.bias")
		}
		if c.QKNorm() {
			lp.qNorm = span(n+"self_attn.q_norm.weight", n+"self_attn.q_norm.weight")
			lp.kNorm = span(n+"self_attn.k_norm.weight", n+"self_attn.k_norm.weight")
		}
		p.layers = append(p.layers, lp)
	}
	p.norm = span("model.norm.weight", "model.norm.weight")
	p.head = p.embed
	if !c.TieEmbeddings {
		p.head = span("lm_head.weight", "lm_head.weight")
	}
	return p
}

// initWeights fills dst with Hugging Face's Llama initialisation: normal(0,
// 0.02) for every matrix, ones for RMSNorm weights, zeros for biases, drawn
// in layout order from a PCG stream seeded with seed, so a seed fixes the
// weights.
func initWeights[F Float](dst []F, c Config, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6d67_7270_6f00_0001))
	for _, s := range newLayout(c).specs {
		w := dst[s.Offset : s.Offset+s.Size()]
		for i := range w {
			switch {
			case s.Norm:
				w[i] = 1
			case s.Bias:
				w[i] = 0
			default:
				w[i] = F(0.02 * rng.NormFloat64())
			}
		}
	}
}
