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

func TestGradAgainstGorgonia(t *testing.T) {
	cfg := Config{Vocab: 11, Hidden: 8, Layers: 2, Heads: 2, KVHeads: 1, MLP: 12, Context: 6, RopeTheta: 10000, NormEps: 1e-6}
	const T, temp = 6, 0.9
	n := testNet(cfg, 31)
	a := testBatch(n, []int{T}, T, 5)
	want := modelLoss(n, a, temp)
	grad := make([]float64, len(n.w.flat))
	n.backward(a, bindParams(cfg, grad), temp)

	b := &gg{t: t, g: G.NewGraph()}
	l := newLayout(cfg)
	nodes := map[string]*G.Node{}
	var params G.Nodes
	for _, s := range l.specs {
		v := append([]float64(nil), n.w.flat[s.Offset:s.Offset+s.Size()]...)
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
	E, H, Gk := cfg.HeadDim(), cfg.Heads, cfg.KVHeads
	half := E / 2
	onehot := func(ids []int32) *G.Node {
		return b.constMat(T, cfg.Vocab, func(i, j int) float64 {
			if int(ids[i]) == j {
				return 1
			}
			return 0
		})
	}
	rope := func(width int) (cos, sin, rot *G.Node) {
		ang := func(p, i int) float64 { return float64(p) * math.Pow(cfg.RopeTheta, -float64(2*(i%E%half))/float64(E)) }
		cos = b.constMat(T, width, func(p, i int) float64 { return math.Cos(ang(p, i)) })
		sin = b.constMat(T, width, func(p, i int) float64 { return math.Sin(ang(p, i)) })
		rot = b.constMat(width, width, func(i, j int) float64 { // (x·rot)[j] = rotate_half(x)[j]
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
		return cos, sin, rot
	}
	applyRope := func(x *G.Node, width int) *G.Node {
		cos, sin, rot := rope(width)
		return b.do(G.Add(b.do(G.HadamardProd(x, cos)), b.do(G.HadamardProd(b.do(G.Mul(x, rot)), sin))))
	}
	scale := b.constMat(T, T, func(int, int) float64 { return 1 / math.Sqrt(float64(E)) })
	mask := b.constMat(T, T, func(i, j int) float64 {
		if j > i {
			return -1e4 // exp underflows to 0: the causal mask
		}
		return 0
	})
	cols := func(x *G.Node, lo, hi int) *G.Node { return b.do(G.Slice(x, nil, G.S(lo, hi))) }

	x := b.do(G.Mul(onehot(a.tokens), nodes["model.embed_tokens.weight"]))
	for i := 0; i < cfg.Layers; i++ {
		p := "model.layers." + itoa(i) + "."
		h := b.rmsnorm(x, nodes[p+"input_layernorm.weight"], cfg.NormEps)
		q := applyRope(b.linear(h, nodes[p+"self_attn.q_proj.weight"]), H*E)
		k := applyRope(b.linear(h, nodes[p+"self_attn.k_proj.weight"]), Gk*E)
		v := b.linear(h, nodes[p+"self_attn.v_proj.weight"])
		var heads G.Nodes
		for hh := 0; hh < H; hh++ {
			g := hh / (H / Gk)
			s := b.do(G.Add(b.do(G.HadamardProd(b.do(G.Mul(cols(q, hh*E, (hh+1)*E), b.do(G.Transpose(cols(k, g*E, (g+1)*E))))), scale)), mask))
			e := b.do(G.Exp(s))
			pr := b.do(G.BroadcastHadamardDiv(e, b.do(G.Sum(e, 1)), nil, []byte{1}))
			heads = append(heads, b.do(G.Mul(pr, cols(v, g*E, (g+1)*E))))
		}
		att := b.do(G.Concat(1, heads...))
		x = b.do(G.Add(x, b.linear(att, nodes[p+"self_attn.o_proj.weight"])))
		h2 := b.rmsnorm(x, nodes[p+"post_attention_layernorm.weight"], cfg.NormEps)
		gate, up := b.linear(h2, nodes[p+"mlp.gate_proj.weight"]), b.linear(h2, nodes[p+"mlp.up_proj.weight"])
		act := b.do(G.HadamardProd(b.do(G.HadamardProd(gate, b.do(G.Sigmoid(gate)))), up))
		x = b.do(G.Add(x, b.linear(act, nodes[p+"mlp.down_proj.weight"])))
	}
	z := b.linear(b.rmsnorm(x, nodes["model.norm.weight"], cfg.NormEps), nodes["lm_head.weight"])
	z = b.do(G.HadamardProd(z, b.constMat(T, cfg.Vocab, func(int, int) float64 { return 1 / temp })))
	logp := b.do(G.BroadcastSub(z, b.do(G.Log(b.do(G.Sum(b.do(G.Exp(z)), 1)))), nil, []byte{1}))
	lp := b.do(G.Sum(b.do(G.HadamardProd(logp, onehot(a.targets))), 1))
	ent := b.do(G.Neg(b.do(G.Sum(b.do(G.HadamardProd(b.do(G.Exp(logp)), logp)), 1))))
	vec := func(v []float64) *G.Node {
		return G.NewConstant(tensor.New(tensor.WithShape(T), tensor.WithBacking(append([]float64(nil), v...))))
	}
	cost := b.do(G.Add(b.do(G.Sum(b.do(G.HadamardProd(lp, vec(a.dlp))))), b.do(G.Sum(b.do(G.HadamardProd(ent, vec(a.dH)))))))
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
		gd := gv.Data().([]float64)
		for i, x := range gd {
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
