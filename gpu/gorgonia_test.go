//go:build !cuda

// The gorgonia oracle stays out of cuda builds: with the cuda tag gorgonia
// itself needs cudnn.h, which no Debian package ships (go-deps.md §5).

package gpu

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// An independent oracle: the same model and loss written as a gorgonia
// graph (reverse-mode autodiff by another library), compared with the fused
// kernels' loss and every parameter gradient. The graph avoids gorgonia's
// two known bugs (go-deps §4): 1/√x is Inverse(Sqrt(x)) rather than
// InverseSqrt, and softmax is written out as exp / Σexp (values are small).
// RoPE's rotate_half is a fixed signed permutation matrix.

type gg struct {
	t   *testing.T
	g   *G.ExprGraph
	err error
}

// do records the first error of a graph-building call and returns its node.
func (b *gg) do(n *G.Node, err error) *G.Node {
	if err != nil && b.err == nil {
		b.err = err
	}
	return n
}

func (b *gg) constMat(rows, cols int, f func(i, j int) float64) *G.Node {
	v := make([]float64, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			v[i*cols+j] = f(i, j)
		}
	}
	return G.NewConstant(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v)))
}

func (b *gg) rmsnorm(x, w *G.Node, eps float64) *G.Node {
	ms := b.do(G.Mean(b.do(G.Square(x)), 1))
	inv := b.do(G.Inverse(b.do(G.Sqrt(b.do(G.Add(ms, G.NewConstant(eps)))))))
	xn := b.do(G.BroadcastHadamardProd(x, inv, nil, []byte{1}))
	return b.do(G.BroadcastHadamardProd(xn, w, nil, []byte{0}))
}

func (b *gg) linear(x, w *G.Node) *G.Node { return b.do(G.Mul(x, b.do(G.Transpose(w)))) }

// TestGradAgainstGorgonia compares the loss and every gradient with the
// gorgonia graph for a Llama, a Qwen2 (q/k/v biases), a Qwen3 (q/k norms,
// head width 6 of hidden 8 and 2 heads) and a Llama with llama3 RoPE
// scaling.
func TestGradAgainstGorgonia(t *testing.T) {
	llama := Config{Vocab: 11, Hidden: 8, Layers: 2, Heads: 2, KVHeads: 1, MLP: 12, Context: 6, RopeTheta: 10000, NormEps: 1e-6}
	qwen2, qwen3, llama3 := llama, llama, llama
	qwen2.Arch = ArchQwen2
	qwen3.Arch, qwen3.HeadWidth = ArchQwen3, 6
	llama3.RopeScaling = RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 3}
	for name, cfg := range map[string]Config{"llama": llama, "qwen2": qwen2, "qwen3": qwen3, "llama3-rope": llama3} {
		t.Run(name, func(t *testing.T) { checkAgainstGorgonia(t, cfg) })
	}
}

func checkAgainstGorgonia(t *testing.T, cfg Config) {
	const T, temp = 6, 0.9
	n := testNet(cfg, 31)
	a := testBatch(n, []int{T}, T, 5)
	want := modelLoss(n, a, temp)
	grad := make([]float64, len(n.w.flat))
	n.backward(a, bindParams(cfg, grad), temp)

	b := &gg{t: t, g: G.NewGraph()}
	l := newLayout(cfg)
	nodes, params := b.params(l, n.w.flat)
	cost := b.loss(cfg, nodes, a, T, temp)
	if b.err != nil {
		t.Fatalf("building the gorgonia graph: %v", b.err)
	}
	if _, err := G.Grad(cost, params...); err != nil {
		t.Fatalf("gorgonia Grad: %v", err)
	}
	vm := G.NewTapeMachine(b.g, G.BindDualValues(params...))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatalf("gorgonia run: %v", err)
	}
	got := cost.Value().Data().(float64)
	if math.Abs(got-want) > 1e-10*math.Max(1, math.Abs(want)) {
		t.Errorf("loss: gorgonia %.12g, fused kernels %.12g", got, want)
	}
	worst := 0.0
	for _, s := range l.specs {
		gv, err := nodes[s.Name].Grad()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		for i, x := range gv.Data().([]float64) {
			if e := math.Abs(x-grad[s.Offset+i]) / math.Max(math.Abs(x), 1e-3); e > worst {
				worst = e
				if e > 1e-8 {
					t.Errorf("%s[%d]: gorgonia %.10g, fused %.10g", s.Name, i, x, grad[s.Offset+i])
				}
			}
		}
	}
	t.Logf("loss %.10g; worst gradient difference vs gorgonia %.3g (relative, floor 1e-3)", want, worst)
}

// params makes a graph variable of every tensor of l with its value in
// flat, by name, and the list of them.
func (b *gg) params(l layout, flat []float64) (map[string]*G.Node, G.Nodes) {
	nodes := map[string]*G.Node{}
	var params G.Nodes
	for _, s := range l.specs {
		v := append([]float64(nil), flat[s.Offset:s.Offset+s.Size()]...)
		var node *G.Node
		if len(s.Shape) == 1 {
			node = G.NewVector(b.g, tensor.Float64, G.WithShape(s.Shape[0]), G.WithName(s.Name),
				G.WithValue(tensor.New(tensor.WithShape(s.Shape[0]), tensor.WithBacking(v))))
		} else {
			node = G.NewMatrix(b.g, tensor.Float64, G.WithShape(s.Shape[0], s.Shape[1]), G.WithName(s.Name),
				G.WithValue(tensor.New(tensor.WithShape(s.Shape[0], s.Shape[1]), tensor.WithBacking(v))))
		}
		nodes[s.Name] = node
		params = append(params, node)
	}
	return nodes, params
}

func (b *gg) onehot(ids []int32, rows, cols int) *G.Node {
	return b.constMat(rows, cols, func(i, j int) float64 {
		if int(ids[i]) == j {
			return 1
		}
		return 0
	})
}

// cols is columns lo..hi-1 of x.
func (b *gg) cols(x *G.Node, lo, hi int) *G.Node { return b.do(G.Slice(x, nil, G.S(lo, hi))) }

// loss is the model's loss on the single sequence of a (T rows): Σ dlp ·
// log-prob of the target + dH · entropy, at temperature temp.
func (b *gg) loss(cfg Config, nodes map[string]*G.Node, a *acts[float64], T int, temp float64) *G.Node {
	x := b.do(G.Mul(b.onehot(a.tokens, T, cfg.Vocab), nodes["model.embed_tokens.weight"]))
	for i := 0; i < cfg.Layers; i++ {
		p := "model.layers." + itoa(i) + "."
		att := b.attention(cfg, nodes, p, b.rmsnorm(x, nodes[p+"input_layernorm.weight"], cfg.NormEps), T)
		x = b.do(G.Add(x, b.linear(att, nodes[p+"self_attn.o_proj.weight"])))
		h2 := b.rmsnorm(x, nodes[p+"post_attention_layernorm.weight"], cfg.NormEps)
		gate, up := b.linear(h2, nodes[p+"mlp.gate_proj.weight"]), b.linear(h2, nodes[p+"mlp.up_proj.weight"])
		act := b.do(G.HadamardProd(b.do(G.HadamardProd(gate, b.do(G.Sigmoid(gate)))), up))
		x = b.do(G.Add(x, b.linear(act, nodes[p+"mlp.down_proj.weight"])))
	}
	head := nodes["lm_head.weight"]
	if cfg.TieEmbeddings {
		head = nodes["model.embed_tokens.weight"]
	}
	z := b.linear(b.rmsnorm(x, nodes["model.norm.weight"], cfg.NormEps), head)
	z = b.do(G.HadamardProd(z, b.constMat(T, cfg.Vocab, func(int, int) float64 { return 1 / temp })))
	logp := b.do(G.BroadcastSub(z, b.do(G.Log(b.do(G.Sum(b.do(G.Exp(z)), 1)))), nil, []byte{1}))
	lp := b.do(G.Sum(b.do(G.HadamardProd(logp, b.onehot(a.targets, T, cfg.Vocab))), 1))
	ent := b.do(G.Neg(b.do(G.Sum(b.do(G.HadamardProd(b.do(G.Exp(logp)), logp)), 1))))
	vec := func(v []float64) *G.Node {
		return G.NewConstant(tensor.New(tensor.WithShape(T), tensor.WithBacking(append([]float64(nil), v...))))
	}
	return b.do(G.Add(b.do(G.Sum(b.do(G.HadamardProd(lp, vec(a.dlp))))), b.do(G.Sum(b.do(G.HadamardProd(ent, vec(a.dH)))))))
}

// attention is the self-attention of layer p (its name prefix) on the
// normed input h ([T, D]), before o_proj: q, k, v projections (+ Qwen2's
// biases), Qwen3's RMSNorm of each q and k head, RoPE with the config's
// frequencies, causal softmax, heads side by side.
func (b *gg) attention(cfg Config, nodes map[string]*G.Node, p string, h *G.Node, T int) *G.Node {
	E, H, Gk := cfg.HeadDim(), cfg.Heads, cfg.KVHeads
	proj := func(name string, heads int) *G.Node {
		y := b.linear(h, nodes[p+"self_attn."+name+"_proj.weight"])
		if bias := nodes[p+"self_attn."+name+"_proj.bias"]; bias != nil {
			y = b.do(G.BroadcastAdd(y, bias, nil, []byte{0}))
		}
		if norm := nodes[p+"self_attn."+name+"_norm.weight"]; norm != nil {
			var hs G.Nodes
			for j := 0; j < heads; j++ {
				hs = append(hs, b.rmsnorm(b.cols(y, j*E, (j+1)*E), norm, cfg.NormEps))
			}
			y = b.do(G.Concat(1, hs...))
		}
		return y
	}
	q, k, v := b.rope(cfg, proj("q", H), H*E, T), b.rope(cfg, proj("k", Gk), Gk*E, T), proj("v", Gk)
	scale := b.constMat(T, T, func(int, int) float64 { return 1 / math.Sqrt(float64(E)) })
	mask := b.constMat(T, T, func(i, j int) float64 {
		if j > i {
			return -1e4 // exp underflows to 0: the causal mask
		}
		return 0
	})
	var heads G.Nodes
	for hh := 0; hh < H; hh++ {
		g := hh / (H / Gk)
		s := b.do(G.Add(b.do(G.HadamardProd(b.do(G.Mul(b.cols(q, hh*E, (hh+1)*E), b.do(G.Transpose(b.cols(k, g*E, (g+1)*E))))), scale)), mask))
		e := b.do(G.Exp(s))
		pr := b.do(G.BroadcastHadamardDiv(e, b.do(G.Sum(e, 1)), nil, []byte{1}))
		heads = append(heads, b.do(G.Mul(pr, b.cols(v, g*E, (g+1)*E))))
	}
	return b.do(G.Concat(1, heads...))
}

// rope rotates the heads of x ([T, width]) by position, with the
// frequencies of ropeFreqs (llama3-scaled when the config says so).
func (b *gg) rope(cfg Config, x *G.Node, width, T int) *G.Node {
	E := cfg.HeadDim()
	half := E / 2
	freqs := ropeFreqs(E, cfg.RopeTheta, cfg.RopeScaling)
	ang := func(p, i int) float64 { return float64(p) * freqs[i%E%half] }
	cos := b.constMat(T, width, func(p, i int) float64 { return math.Cos(ang(p, i)) })
	sin := b.constMat(T, width, func(p, i int) float64 { return math.Sin(ang(p, i)) })
	rot := b.constMat(width, width, func(i, j int) float64 { // (x·rot)[j] = rotate_half(x)[j]
		switch {
		case i/E != j/E:
			return 0
		case j%E < half && i%E == j%E+half:
			return -1
		case j%E >= half && i%E == j%E-half:
			return 1
		}
		return 0
	})
	return b.do(G.Add(b.do(G.HadamardProd(x, cos)), b.do(G.HadamardProd(b.do(G.Mul(x, rot)), sin))))
}
