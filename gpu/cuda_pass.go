//go:build cuda || cudaemu

package gpu

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// cudaPass queues one forward or backward pass of a net over a loaded
// workspace: the kernels of gpu/cuda/kernels and cuBLAS products, in the
// order of model.go's forward and backward. It keeps the first error
// (later launches still queue: harmless, and errors are device failures
// or programming errors).
type cudaPass struct {
	n     *cudaNet
	a     *cudaActs
	rt    cuda.Runtime
	s16   [2]cuda.Ptr // bf16 scratch for the products' operands (bf16 products)
	cap16 int         // elements of each
	err   error
}

func newCUDAPass(n *cudaNet, a *cudaActs) *cudaPass {
	return &cudaPass{n: n, a: a, rt: n.rt, s16: a.s16, cap16: a.cap16}
}

func (p *cudaPass) do(err error) {
	if p.err == nil && err != nil {
		p.err = err
	}
}

// dims are the model's widths: hidden, MLP, vocabulary, head, query and
// key/value heads, the qkv row and the attention row.
func (p *cudaPass) dims() (D, M, V, E, H, G, qs, he int) {
	c := p.n.cfg
	D, M, V, E, H, G = c.Hidden, c.MLP, c.Vocab, c.HeadDim(), c.Heads, c.KVHeads
	return D, M, V, E, H, G, (H + 2*G) * E, H * E
}

// mm queues C = op(A)·op(B) + beta·C (C row-major, ldc its columns) in the
// net's precision: bf16 inputs from the operands' bf16 copies (converted
// into the workspace's scratch when they have none) or fp32/TF32.
func (p *cudaPass) mm(transA, transB bool, a, b mat, beta float32, c cuda.Ptr) {
	m, k := a.rows, a.cols
	if transA {
		m, k = k, m
	}
	n := b.cols
	if transB {
		n = b.rows
	}
	if m == 0 || n == 0 || (k == 0 && beta == 1) || p.err != nil {
		return
	}
	g := cuda.Gemm{TransA: transA, TransB: transB, M: m, N: n, K: k, Alpha: 1, Beta: beta, A: a.p, B: b.p, C: c,
		LDA: a.cols, LDB: b.cols, LDC: n, Math: p.n.dev.math}
	if g.Math == cuda.MathBF16 {
		g.A, g.B = p.half(a, 0).h, p.half(b, 1).h
	}
	p.do(p.rt.Gemm(g))
}

// half returns x with a bf16 copy: its own, or one converted into bf16
// scratch slot (0 or 1; a later conversion into the slot overwrites it).
// With fp32 products it returns x.
func (p *cudaPass) half(x mat, slot int) mat {
	if x.h != 0 || p.n.dev.math != cuda.MathBF16 || !p.fits16(x) {
		return x
	}
	p.do(kernels.F32ToBF16(p.rt, p.s16[slot], x.p, x.rows*x.cols))
	x.h = p.s16[slot]
	return x
}

// out is x, the output of the kernel queued next, with the bf16 copy that
// kernel writes beside it for the products that read it: x's own (a
// saved activation's), else with bf16 products scratch slot 0, which
// nothing else writes before those products (mm converts a product's
// other operand into slot 1); none with fp32 products or the net's
// convert16, when half converts it.
func (p *cudaPass) out(x mat) mat {
	if x.h == 0 && p.n.dev.math == cuda.MathBF16 && !p.n.convert16 && p.fits16(x) {
		x.h = p.s16[0]
	}
	return x
}

// saved is layer l's activation x ([rows, cols]) with its bf16 copy hs[l]:
// the forward pass writes it for its product and the backward pass reads
// it again for the weight gradient. Only a training workspace with bf16
// products keeps them (hs nil otherwise; with convert16 they go unused and
// half converts x for each product).
func (p *cudaPass) saved(x cuda.Ptr, hs []cuda.Ptr, l, rows, cols int) mat {
	m := act(x, rows, cols)
	if hs != nil && !p.n.convert16 {
		m.h = hs[l]
	}
	return m
}

// fits16 says whether x fits a bf16 scratch slot (a pass's error if not).
func (p *cudaPass) fits16(x mat) bool {
	if x.rows*x.cols > p.cap16 {
		p.do(fmt.Errorf("gpu: cuda: a %d×%d operand exceeds the bf16 scratch of %d", x.rows, x.cols, p.cap16))
		return false
	}
	return true
}

// attnShape is the batch's attention, on the device's attention kernels
// (the CUDA cores for a width without tensor-core kernels).
func (p *cudaPass) attnShape() kernels.AttnShape {
	_, _, _, E, H, G, _, _ := p.dims()
	m := p.n.dev.attn
	if !kernels.TensorAttention(E) {
		m = cuda.MathFP32
	}
	return kernels.AttnShape{B: p.a.B, T: p.a.T, H: H, G: G, E: E, Math: m}
}

func (p *cudaPass) eps() float32 { return float32(p.n.cfg.NormEps) }

// forward loads plan p into workspace ws (train: with what the backward
// pass needs), runs the forward pass at temperature temp and writes the
// outputs to their slots of lp and ent.
func (n *cudaNet) forward(ws *cudaActs, p *rowPlan, train bool, temp float64, lp, ent []float64) error {
	if err := ws.load(n.rt, p, train); err != nil {
		return err
	}
	pass := newCUDAPass(n, ws)
	if pass.forward(temp); pass.err != nil {
		return fmt.Errorf("forward: %w", pass.err)
	}
	return ws.outputs(n.rt, p.slots, lp, ent)
}

// forward runs the decoder over the loaded rows and leaves each need
// row's target log-prob and entropy at temperature temp in the stats
// (model.go's forward).
func (p *cudaPass) forward(temp float64) {
	a, n := p.a, p.n
	if a.N == 0 {
		return
	}
	D, _, _, _, _, _, _, _ := p.dims()
	p.do(kernels.Embed(p.rt, a.resid[0], f32At(n.w, n.lay.embed), a.tokens, a.N, D))
	for l := range n.cfg.Layers {
		p.layerForward(l)
	}
	p.headForward(temp)
}

// layerForward is block l: the last one, after attention, on the need
// rows only.
func (p *cudaPass) layerForward(l int) {
	a, n, rt := p.a, p.n, p.rt
	D, M, _, E, H, G, qs, he := p.dims()
	lw, N := n.lay.layers[l], a.N
	xn1 := p.out(p.saved(a.xn1[l], a.xn1h, l, N, D))
	p.do(kernels.RMSNorm(rt, xn1.p, xn1.h, a.inv1[l], a.resid[l], f32At(n.w, lw.attnNorm), N, D, p.eps()))
	p.projectQKV(lw, a.qkv[l], xn1, a.qkRaw[l], a.qkInv[l]) // + Qwen2's bias, Qwen3's q/k norms
	p.do(kernels.RoPE(rt, a.qkv[l], a.pos, n.cos, n.sin, N, qs, H+G, E, 1))
	p.do(kernels.AttentionForward(rt, a.att[l], a.lse[l], a.qkv[l], a.start, a.pre, a.from, p.attnShape()))
	R, att := N, a.att[l]
	if l == n.cfg.Layers-1 {
		R, att = a.K, a.attRows
		p.do(kernels.GatherRows(rt, a.attRows, a.att[l], a.rows, R, he))
		p.do(kernels.GatherRows(rt, a.mid[l], a.resid[l], a.rows, R, D))
	} else {
		p.do(rt.Copy(a.mid[l], a.resid[l], 4*int64(N*D)))
	}
	o := p.saved(att, a.atth, l, R, he)
	if o.h != 0 { // rounded once for o_proj and its weight gradient
		p.do(kernels.F32ToBF16(rt, o.h, o.p, R*he))
	}
	p.mm(false, true, o, n.weight(lw.o, D, he), 1, a.mid[l]) // mid = x + o_proj(att)
	xn2 := p.out(p.saved(a.xn2[l], a.xn2h, l, R, D))
	p.do(kernels.RMSNorm(rt, xn2.p, xn2.h, a.inv2[l], a.mid[l], f32At(n.w, lw.mlpNorm), R, D, p.eps()))
	p.mm(false, true, xn2, n.weight(lw.gateUp, 2*M, D), 0, a.gu[l])
	sw := p.out(p.saved(a.act[l], a.acth, l, R, M))
	p.do(kernels.SwiGLU(rt, sw.p, sw.h, a.sig[l], a.gu[l], R, M))
	p.do(rt.Copy(a.resid[l+1], a.mid[l], 4*int64(R*D)))
	p.mm(false, true, sw, n.weight(lw.down, D, M), 1, a.resid[l+1]) // x' = mid + down_proj(act)
}

// headForward is the final norm and the lm_head tail on the need rows, in
// blocks of headRows rows.
func (p *cudaPass) headForward(temp float64) {
	a, n := p.a, p.n
	D, _, V, _, _, _, _, _ := p.dims()
	p.do(kernels.RMSNorm(p.rt, a.xf, 0, a.invf, a.resid[n.cfg.Layers], f32At(n.w, n.lay.norm), a.K, D, p.eps()))
	inv := float32(1 / temp)
	for lo := 0; lo < a.K; lo += a.headRows {
		r := min(a.headRows, a.K-lo)
		p.mm(false, true, act(f32At(a.xf, lo*D), r, D), n.weight(n.lay.head, V, D), 0, a.logits)
		p.do(kernels.LogSoftmaxEntropy(p.rt, a.stat(statLogp, lo), a.stat(statEnt, lo), a.stat(statMax, lo), a.stat(statLse, lo),
			a.logits, f32At(a.targets, lo), r, V, inv))
	}
}

// backward adds to g (the gradients, flat) those of the upstream
// gradients in the stats' dlp and dH rows, after forward on the same
// workspace at temperature temp (model.go's backward).
func (p *cudaPass) backward(g cuda.Ptr, temp float64) {
	a, n := p.a, p.n
	if a.N == 0 {
		return
	}
	D, _, _, _, _, _, _, _ := p.dims()
	dx := p.headBackward(g, temp)
	for l := n.cfg.Layers - 1; l >= 0; l-- { // dx (in a.dx) is dLoss/d resid[l+1] (the need rows for the last block)
		dx = p.layerBackward(g, l, dx)
	}
	p.do(kernels.EmbedBackward(p.rt, f32At(g, n.lay.embed), dx.p, a.tokRows, a.tokOff, a.tokUniq, a.U, D))
}

// headBackward is the lm_head tail's backward in blocks (recomputing a
// block's logits when there are several), then the final norm's: it
// returns dLoss/d resid[L] on the need rows, in a.dx.
func (p *cudaPass) headBackward(g cuda.Ptr, temp float64) mat {
	a, n := p.a, p.n
	D, _, V, _, _, _, _, _ := p.dims()
	head, inv := n.weight(n.lay.head, V, D), float32(1/temp)
	for lo := 0; lo < a.K; lo += a.headRows {
		r := min(a.headRows, a.K-lo)
		xf := act(f32At(a.xf, lo*D), r, D)
		if a.K > a.headRows {
			p.mm(false, true, xf, head, 0, a.logits)
		}
		dl := p.out(act(a.logits, r, V))
		p.do(kernels.LogSoftmaxEntropyBackward(p.rt, dl.p, dl.h, a.logits, a.stat(statMax, lo), a.stat(statLse, lo), a.stat(statEnt, lo),
			f32At(a.targets, lo), a.stat(statDlp, lo), a.stat(statDH, lo), r, V, inv))
		dl = p.half(dl, 0)
		p.mm(true, false, dl, xf, 1, f32At(g, n.lay.head)) // dHead += dlogitsᵀ·xf
		p.mm(false, false, dl, head, 0, f32At(a.dxn, lo*D))
	}
	p.do(p.rt.Memset(a.dx, 0, 4*int64(a.K*D)))
	dx := p.out(act(a.dx, a.K, D))
	p.do(kernels.RMSNormBackward(p.rt, dx.p, dx.h, f32At(g, n.lay.norm), a.dxn, a.resid[n.cfg.Layers], a.invf,
		f32At(n.w, n.lay.norm), a.part, a.K, D))
	return dx
}

// layerBackward is block l's backward from dx, dLoss/d resid[l+1] in a.dx
// (R rows), to the dLoss/d resid[l] it returns (in a.dx, every row).
func (p *cudaPass) layerBackward(g cuda.Ptr, l int, dx mat) mat {
	a, n, rt := p.a, p.n, p.rt
	D, M, _, _, _, _, _, he := p.dims()
	lw, N := n.lay.layers[l], a.N
	R, att, datt := N, a.att[l], a.datt
	if l == n.cfg.Layers-1 {
		R, att = a.K, a.attRows
	}
	if R < N { // datt's compact rows, spread below
		datt = a.dattK
	}
	dx = p.half(dx, 0)
	p.mm(true, false, dx, p.saved(a.act[l], a.acth, l, R, M), 1, f32At(g, lw.down))
	p.mm(false, false, dx, n.weight(lw.down, D, M), 0, a.dact)
	dgu := p.out(act(a.dgu, R, 2*M))
	p.do(kernels.SwiGLUBackward(rt, dgu.p, dgu.h, a.dact, a.gu[l], a.sig[l], R, M))
	dgu = p.half(dgu, 0)
	p.mm(true, false, dgu, p.saved(a.xn2[l], a.xn2h, l, R, D), 1, f32At(g, lw.gateUp))
	p.mm(false, false, dgu, n.weight(lw.gateUp, 2*M, D), 0, a.dxn)
	dx = p.out(act(a.dx, R, D))
	p.do(kernels.RMSNormBackward(rt, dx.p, dx.h, f32At(g, lw.mlpNorm), a.dxn, a.mid[l], a.inv2[l], f32At(n.w, lw.mlpNorm), a.part, R, D)) // now dLoss/d mid
	dx = p.half(dx, 0)
	p.mm(true, false, dx, p.saved(att, a.atth, l, R, he), 1, f32At(g, lw.o))
	p.mm(false, false, dx, n.weight(lw.o, D, he), 0, datt)
	if R < N { // back to every row: the others get gradients through attention only
		p.spread(a.datt, a.dattK, he)
		p.spread(a.dx2, a.dx, D)
		a.dx, a.dx2 = a.dx2, a.dx
	}
	return p.attentionBackward(g, l)
}

// spread writes the K compact rows of src to their rows of dst ([N, d]),
// zeros elsewhere.
func (p *cudaPass) spread(dst, src cuda.Ptr, d int) {
	p.do(p.rt.Memset(dst, 0, 4*int64(p.a.N*d)))
	p.do(kernels.ScatterRows(p.rt, dst, src, p.a.rows, p.a.K, d))
}

// attentionBackward is block l's attention and qkv product backward, from
// datt and dx (dLoss/d mid) on every row to the dLoss/d resid[l] it returns
// (in dx).
func (p *cudaPass) attentionBackward(g cuda.Ptr, l int) mat {
	a, n, rt := p.a, p.n, p.rt
	D, _, _, E, H, G, qs, _ := p.dims()
	lw, N := n.lay.layers[l], a.N
	p.do(kernels.AttentionBackward(rt, a.dqkv, a.delta, a.datt, a.att[l], a.qkv[l], a.lse[l], a.start, a.pre, a.from, N, p.attnShape()))
	p.do(kernels.RoPE(rt, a.dqkv, a.pos, n.cos, n.sin, N, qs, H+G, E, -1)) // dq, dk wrt the unrotated q, k
	p.qkvBackward(g, l)                                                    // Qwen3's q/k norms, Qwen2's bias
	dqkv := p.half(act(a.dqkv, N, qs), 0)
	p.mm(true, false, dqkv, p.saved(a.xn1[l], a.xn1h, l, N, D), 1, f32At(g, lw.qkv))
	p.mm(false, false, dqkv, n.weight(lw.qkv, qs, D), 0, a.dxn)
	dx := p.out(act(a.dx, N, D))
	p.do(kernels.RMSNormBackward(rt, dx.p, dx.h, f32At(g, lw.attnNorm), a.dxn, a.resid[l], a.inv1[l], f32At(n.w, lw.attnNorm), a.part, N, D))
	return dx
}
