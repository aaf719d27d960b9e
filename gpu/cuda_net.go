//go:build cuda || cudaemu

package gpu

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// The CUDA engine's model: the weights on the device as one flat fp32
// buffer in TensorNames order (and, for bf16 products, its bf16 copy),
// the RoPE tables, and the passes of model.go as kernels and cuBLAS
// products over a workspace (cuda_acts.go).

// cudaLayer is where one decoder block's tensors start in the flat
// buffer, in elements (newLayout's offsets); bias (Qwen2's q/k/v biases,
// one vector) and qkNorm (Qwen3's q_norm, then k_norm) are -1 in a layer
// without them.
type cudaLayer struct{ attnNorm, qkv, bias, qkNorm, o, mlpNorm, gateUp, down int }

// cudaLayout is newLayout's offsets as the passes address them, and the
// no-decay ranges of AdamW ([lo, hi) element pairs: the norm weights).
type cudaLayout struct {
	embed, norm, head int
	layers            []cudaLayer
	size              int
	nodecay           []int64
}

func newCUDALayout(c Config) cudaLayout {
	l := newLayout(c)
	off := func(name string) int { return l.tensor(name).Offset }
	cl := cudaLayout{embed: off("model.embed_tokens.weight"), norm: off("model.norm.weight"), size: l.size}
	cl.head = cl.embed
	if !c.TieEmbeddings {
		cl.head = off("lm_head.weight")
	}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		lay := cudaLayer{attnNorm: off(p + "input_layernorm.weight"), qkv: off(p + "self_attn.q_proj.weight"), bias: -1, qkNorm: -1,
			o: off(p + "self_attn.o_proj.weight"), mlpNorm: off(p + "post_attention_layernorm.weight"),
			gateUp: off(p + "mlp.gate_proj.weight"), down: off(p + "mlp.down_proj.weight")}
		if c.QKVBias() {
			lay.bias = off(p + "self_attn.q_proj.bias")
		}
		if c.QKNorm() {
			lay.qkNorm = off(p + "self_attn.q_norm.weight")
		}
		cl.layers = append(cl.layers, lay)
	}
	for _, s := range l.specs {
		if s.NoDecay() {
			cl.nodecay = append(cl.nodecay, int64(s.Offset), int64(s.Offset+s.Size()))
		}
	}
	return cl
}

// checkCUDAConfig refuses what the CUDA engine cannot run: head widths
// its attention kernels do not have.
func checkCUDAConfig(c Config) error {
	if e := c.HeadDim(); e != 16 && e != 32 && e != 64 && e != 128 {
		return fmt.Errorf("%w: the CUDA engine's attention takes head widths 16, 32, 64 and 128, not %d", ErrBadConfig, e)
	}
	return nil
}

// cudaNet is a model's weights on the device and the RoPE tables.
type cudaNet struct {
	dev      *cudaDevice
	rt       cuda.Runtime
	cfg      Config
	lay      cudaLayout
	w        cuda.Ptr // [P] fp32
	w16      cuda.Ptr // [P] bf16 copy of w (bf16 products), else 0
	cos, sin cuda.Ptr // [Context, E/2]
	mem      *arena

	headBudget int // floats of one lm_head block of logits (headBudget)

	// convert16 has bf16 products convert every activation operand with
	// f32_to_bf16_kernel, as before the kernels that write them wrote
	// their bf16 copies too (cudaPass.out): tests compare the two.
	convert16 bool
}

// netBytes is the device memory of a cudaNet.
func netBytes(d *cudaDevice, c Config) int64 {
	a := &arena{}
	layoutNet(a, c, d.math)
	return a.bytes
}

// layoutNet takes a net's buffers from a.
func layoutNet(a *arena, c Config, math cuda.Math) (w, w16, cos, sin cuda.Ptr) {
	p, half := c.NumParams(), c.Context*c.HeadDim()/2
	w = a.f32(p)
	if math == cuda.MathBF16 {
		w16 = a.bf16(p)
	}
	return w, w16, a.f32(half), a.f32(half)
}

// newCUDANet allocates a net on d and fills its RoPE tables; the weights
// are the caller's to set (setWeights, or a device copy).
func newCUDANet(d *cudaDevice, c Config) (*cudaNet, error) {
	if err := checkCUDAConfig(c); err != nil {
		return nil, err
	}
	n := &cudaNet{dev: d, rt: d.rt, cfg: c, lay: newCUDALayout(c), mem: &arena{dev: d}, headBudget: headBudget}
	n.w, n.w16, n.cos, n.sin = layoutNet(n.mem, c, d.math)
	if n.mem.err != nil {
		n.mem.release()
		return nil, n.mem.err
	}
	cos, sin := ropeTable[float32](c.Context, c.HeadDim(), c.RopeTheta, c.RopeScaling)
	if err := uploadAll(n.rt, []cuda.Ptr{n.cos, n.sin}, cos, sin); err != nil {
		n.mem.release()
		return nil, err
	}
	return n, nil
}

// uploadAll uploads each host slice to its buffer.
func uploadAll(rt cuda.Runtime, dst []cuda.Ptr, src ...[]float32) error {
	for i, s := range src {
		if err := rt.Upload(dst[i], cuda.Bytes(s)); err != nil {
			return fmt.Errorf("upload: %w", err)
		}
	}
	return nil
}

// setWeights uploads w (flat, TensorNames order) and refreshes the bf16
// copy.
func (n *cudaNet) setWeights(w []float32) error {
	if len(w) != n.lay.size {
		return fmt.Errorf("%w: %d weights, the model has %d", ErrBadInput, len(w), n.lay.size)
	}
	if err := n.rt.Upload(n.w, cuda.Bytes(w)); err != nil {
		return fmt.Errorf("set weights: %w", err)
	}
	return n.weightsChanged()
}

// copyFrom copies src's weights (same config) device to device.
func (n *cudaNet) copyFrom(src *cudaNet) error {
	if err := n.rt.Copy(n.w, src.w, 4*int64(n.lay.size)); err != nil {
		return fmt.Errorf("copy weights: %w", err)
	}
	return n.weightsChanged()
}

// weightsChanged refreshes the bf16 copy of the weights.
func (n *cudaNet) weightsChanged() error {
	if n.w16 == 0 {
		return nil
	}
	if err := kernels.F32ToBF16(n.rt, n.w16, n.w, n.lay.size); err != nil {
		return fmt.Errorf("bf16 weights: %w", err)
	}
	return nil
}

// readWeights copies weights offset..offset+len(dst)-1 to dst.
func (n *cudaNet) readWeights(dst []float32, offset int) error {
	if offset < 0 || offset+len(dst) > n.lay.size {
		return fmt.Errorf("%w: weights %d..%d of %d", ErrBadInput, offset, offset+len(dst), n.lay.size)
	}
	if err := n.rt.Download(cuda.Bytes(dst), f32At(n.w, offset)); err != nil {
		return fmt.Errorf("read weights: %w", err)
	}
	return nil
}

// mat is a row-major matrix operand of a product: fp32 on the device and,
// when it has one (the weights), its bf16 copy.
type mat struct {
	p, h       cuda.Ptr
	rows, cols int
}

// weight is the [rows, cols] tensor at element off of the weights.
func (n *cudaNet) weight(off, rows, cols int) mat {
	return mat{p: f32At(n.w, off), h: bf16At(n.w16, off), rows: rows, cols: cols}
}

// act is an fp32 activation [rows, cols] at p.
func act(p cuda.Ptr, rows, cols int) mat { return mat{p: p, rows: rows, cols: cols} }
