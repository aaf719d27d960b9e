//go:build cuda || cudaemu

package gpu

import (
	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// The attention inputs of Qwen2 and Qwen3 on the device (gpu/qkv.go's
// twins, kernels in cuda/kernels/qkv.cuh), between the q/k/v product and
// RoPE, shared by the training and scoring passes and the decoder. The
// bias and the norm weights stay fp32 in every precision: they are not
// operands of a product.

// partCols is the columns of a workspace's scratch for the gradients
// summed over rows in two passes: the RMSNorms' D, and Qwen2's bias's
// (H+2G)·E or Qwen3's norm weights' 2E.
func partCols(c Config) int {
	e := c.HeadDim()
	switch {
	case c.QKVBias():
		return max(c.Hidden, (c.Heads+2*c.KVHeads)*e)
	case c.QKNorm():
		return max(c.Hidden, 2*e)
	}
	return c.Hidden
}

func (p *cudaPass) heads() kernels.HeadShape {
	c := p.n.cfg
	return kernels.HeadShape{H: c.Heads, G: c.KVHeads, E: c.HeadDim()}
}

// projectQKV queues qkv = x·Wᵀ for the r rows of x ([r, D]) with layer lw's
// stacked q/k/v weights, then adds the layer's bias to every row (Qwen2)
// or RMSNorms each query and key head (Qwen3: each head's 1/rms to inv,
// the heads before the norm to raw unless it is 0): projectQKV and
// qkNorm. RoPE follows.
//
// The bias is its own pass over qkv (add_bias_rows) rather than the
// product's beta with a broadcast copy: both read and write qkv once
// more, and this keeps the product at beta 0, where cuBLAS does not read
// C, the same call as a Llama layer's.
func (p *cudaPass) projectQKV(lw cudaLayer, qkv cuda.Ptr, x mat, raw, inv cuda.Ptr) {
	D, _, _, _, _, _, qs, _ := p.dims()
	n, r := p.n, x.rows
	p.mm(false, true, x, n.weight(lw.qkv, qs, D), 0, qkv)
	if lw.bias >= 0 {
		p.do(kernels.AddBiasRows(p.rt, qkv, f32At(n.w, lw.bias), r, qs))
	}
	if lw.qkNorm >= 0 {
		E := p.heads().E
		p.do(kernels.QKNorm(p.rt, qkv, raw, inv, f32At(n.w, lw.qkNorm), f32At(n.w, lw.qkNorm+E), r, p.heads(), p.eps()))
	}
}

// qkvBackward turns block l's dqkv, the gradient wrt the normed and
// unrotated q and k heads and v (after attention's backward and the
// inverse rotation), into the gradient wrt the product's output, and
// accumulates into g the q/k norm weights' gradients (Qwen3) or the
// bias's, Σ_rows dqkv (Qwen2): qkNormBackward and biasBackward, in the
// CPU's order. The product's gradients follow.
func (p *cudaPass) qkvBackward(g cuda.Ptr, l int) {
	a, n := p.a, p.n
	_, _, _, _, _, _, qs, _ := p.dims()
	lw := n.lay.layers[l]
	if lw.qkNorm >= 0 {
		E := p.heads().E
		p.do(kernels.QKNormBackward(p.rt, a.dqkv, f32At(g, lw.qkNorm), a.qkRaw[l], a.qkInv[l], f32At(n.w, lw.qkNorm),
			f32At(n.w, lw.qkNorm+E), a.part, a.N, p.heads()))
	}
	if lw.bias >= 0 {
		p.do(kernels.BiasBackward(p.rt, f32At(g, lw.bias), a.dqkv, a.part, a.N, qs))
	}
}
