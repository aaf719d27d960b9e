//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// Sampling on the device (issue 24): the CPU decoder's plan (sample.go)
// with a key/value cache on the GPU. Every prompt × completion of a call
// is a cache slot, and all decode together: a group's shared prompt is
// prefilled once (its keys and values appended to each of the group's
// slots), then each step runs every unfinished sequence's last token
// through the layers (kv_append, decode_attention) to the lm_head and
// draws the next tokens with sample_tokens: the drawer's semantics, with
// random numbers keyed by (prompt seed, completion index, token index)
// (kernels.DrawUniform). Per step the rows' tokens, positions, slots and
// draw state go in (one upload) and the draws come out (one download).

// decodeShape is a decoder's room: S slots of T positions, R rows a step
// (the prefill's or S, the larger), M words of prefill slot maps (prefill
// rows × (completions − 1)).
type decodeShape struct{ S, T, R, M int }

func (s decodeShape) fits(t decodeShape) bool {
	return t.S <= s.S && t.T <= s.T && t.R <= s.R && t.M <= s.M
}

func (s decodeShape) union(t decodeShape) decodeShape {
	return decodeShape{S: max(s.S, t.S), T: max(s.T, t.T), R: max(s.R, t.R), M: max(s.M, t.M)}
}

// cudaDecoder is the device state of sampling: the cache, one step's
// activations, its inputs and the draws.
type cudaDecoder struct {
	cap    decodeShape
	kc, vc []cuda.Ptr // L × [S, G, T, E]: rotated keys and values by slot, head and position

	in                                   cuda.Ptr // the step's inputs (inOffsets), one upload
	seeds, tok, pos, slot, outs          cuda.Ptr // views of in
	completion, limit, count, maps       cuda.Ptr
	x, xn, inv, qkv, att, gu, act, logit cuda.Ptr // [R, ·] activations; logit [S, V]
	qkInv                                cuda.Ptr // [R, H+G]: Qwen3's q/k heads' 1/rms, else 0
	drawn                                cuda.Ptr // tokens, log-probs, entropies, finish: [4, S] 32-bit
	s16                                  [2]cuda.Ptr
	cap16                                int
	stride                               int // of the slot maps: the call's prefill rows

	host []uint32 // staging of in
	out  []uint32 // staging of drawn
}

// inOffsets are where seeds (uint64: two words each), tok, pos, slot,
// outs, completion, limit, count and the slot maps start in the inputs,
// in 32-bit words, and their length.
func inOffsets(s decodeShape) (off [9]int, n int) {
	sizes := [9]int{2 * s.S, s.R, s.R, s.R, s.S, s.S, s.S, s.S, s.M}
	for i, sz := range sizes {
		off[i] = n
		n += sz
	}
	return off, n
}

// newCUDADecoder lays out a decoder of shape s for net n in mem (sized
// only when mem has no device).
func newCUDADecoder(n *cudaNet, s decodeShape, mem *arena) *cudaDecoder {
	c := n.cfg
	D, M, V, E := c.Hidden, c.MLP, c.Vocab, c.HeadDim()
	qs, he := (c.Heads+2*c.KVHeads)*E, c.Heads*E
	d := &cudaDecoder{cap: s}
	for range c.Layers {
		d.kc, d.vc = append(d.kc, mem.f32(s.S*c.KVHeads*s.T*E)), append(d.vc, mem.f32(s.S*c.KVHeads*s.T*E))
	}
	off, words := inOffsets(s)
	d.in = mem.i32(words)
	at := func(i int) cuda.Ptr { return f32At(d.in, off[i]) }
	d.seeds, d.tok, d.pos, d.slot, d.outs = at(0), at(1), at(2), at(3), at(4)
	d.completion, d.limit, d.count, d.maps = at(5), at(6), at(7), at(8)
	R := s.R
	d.x, d.xn, d.inv, d.qkv = mem.f32(R*D), mem.f32(R*D), mem.f32(R), mem.f32(R*qs)
	d.att, d.gu, d.act, d.logit = mem.f32(R*he), mem.f32(R*2*M), mem.f32(R*M), mem.f32(s.S*V) // logits: S rows at most (the prefill's are its slots')
	d.drawn = mem.i32(4 * s.S)
	if c.QKNorm() {
		d.qkInv = mem.f32(R * (c.Heads + c.KVHeads))
	}
	if n.dev.math == cuda.MathBF16 {
		d.cap16 = R * max(D, he, M)
		d.s16 = [2]cuda.Ptr{mem.bf16(d.cap16), mem.bf16(d.cap16)}
	}
	if mem.dev != nil {
		d.host, d.out = make([]uint32, words), make([]uint32, 4*s.S)
	}
	return d
}

// sampleJob is a Sample call on the host: the outputs, each slot's token
// limit, and the slots still drawing (slot s continues prompt s/n).
type sampleJob struct {
	prompts [][]int
	n       int
	opt     SampleOptions
	out     []Sample
	limit   []int
	active  []int32 // the slots of this step's rows, ascending
	prefill int     // rows of the prefill: every prompt's tokens once
	shape   decodeShape
}

func newSampleJob(c Config, prompts [][]int, n int, opt SampleOptions) *sampleJob {
	S := len(prompts) * n
	j := &sampleJob{prompts: prompts, n: n, opt: opt, out: make([]Sample, S), limit: make([]int, S)}
	j.shape = decodeShape{S: S, T: 1}
	for i, p := range prompts {
		j.prefill += len(p)
		for k := range n {
			s := i*n + k
			j.limit[s] = min(opt.MaxNewTokens, c.Context-len(p))
			j.shape.T = max(j.shape.T, len(p)+j.limit[s])
			j.out[s] = Sample{Prompt: i, Tokens: make([]int, 0, j.limit[s]), LogProbs: make([]float64, 0, j.limit[s]),
				Entropies: make([]float64, 0, j.limit[s])}
		}
	}
	j.shape.R, j.shape.M = max(j.prefill, S), j.prefill*(n-1)
	return j
}

// stagePrefill writes the prefill's inputs: every prompt's tokens once,
// in the cache slot of its first completion (the maps send its keys and
// values to the other completions' slots too), each slot's logits from
// its prompt's last row, and every slot's draw state.
func (j *sampleJob) stagePrefill(d *cudaDecoder) {
	off, _ := inOffsets(d.cap)
	h, r := d.host, 0
	for i, p := range j.prompts {
		for t, id := range p {
			h[off[1]+r], h[off[2]+r], h[off[3]+r] = uint32(id), uint32(t), uint32(i*j.n)
			for k := 1; k < j.n; k++ {
				h[off[8]+(k-1)*j.prefill+r] = uint32(i*j.n + k)
			}
			r++
		}
		for k := range j.n {
			h[off[4]+i*j.n+k] = uint32(r - 1)
		}
	}
	j.active = j.active[:0]
	for s := range j.out {
		j.active = append(j.active, int32(s))
	}
	j.stageDraws(d)
}

// stageDraws writes the draw state of the active slots, one row each:
// the prompt's seed, the completion index, the limit and the tokens drawn.
func (j *sampleJob) stageDraws(d *cudaDecoder) {
	off, _ := inOffsets(d.cap)
	h := d.host
	for k, s := range j.active {
		var seed uint64
		if !j.opt.Greedy {
			seed = j.opt.Seeds[int(s)/j.n]
		}
		h[off[0]+2*k], h[off[0]+2*k+1] = uint32(seed), uint32(seed>>32)
		h[off[5]+k], h[off[6]+k], h[off[7]+k] = uint32(int(s)%j.n), uint32(j.limit[s]), uint32(len(j.out[s].Tokens))
	}
}

// record appends the step's draws to their samples and keeps the slots
// that go on (not EOS, not at their limit) as the next step's rows, with
// their last token as input.
func (j *sampleJob) record(d *cudaDecoder) {
	off, _ := inOffsets(d.cap)
	S, h, next := d.cap.S, d.host, 0
	for k, s := range j.active {
		smp := &j.out[s]
		tok := int(d.out[k])
		smp.Tokens = append(smp.Tokens, tok)
		smp.LogProbs = append(smp.LogProbs, float64(math.Float32frombits(d.out[S+k])))
		smp.Entropies = append(smp.Entropies, float64(math.Float32frombits(d.out[2*S+k])))
		switch {
		case j.opt.EOS > 0 && tok == j.opt.EOS:
			smp.Finish = FinishStop
		case len(smp.Tokens) == j.limit[s]:
			smp.Finish = FinishLength
		default:
			h[off[1]+next], h[off[2]+next], h[off[3]+next] = uint32(tok), uint32(len(j.prompts[smp.Prompt])+len(smp.Tokens)-1), uint32(s)
			j.active[next] = s
			next++
		}
	}
	j.active = j.active[:next]
}

// sample runs job on the decoder: the prefill and its draws, then a step
// a token until every slot has finished.
func (d *cudaDecoder) sample(p *cudaPass, j *sampleJob) error {
	j.stagePrefill(d)
	d.stride = j.prefill
	rows, outs, maps := j.prefill, j.shape.S, j.n-1
	off, _ := inOffsets(d.cap)
	staged := d.host // the prefill's inputs; a step's stop before the slot maps
	for len(j.active) > 0 {
		if err := p.rt.Upload(d.in, cuda.Bytes(staged)); err != nil {
			return fmt.Errorf("sample: upload: %w", err)
		}
		d.forward(p, rows, outs, maps)
		d.draw(p, len(j.active), j.opt)
		if p.err != nil {
			return fmt.Errorf("sample: %w", p.err)
		}
		if err := p.rt.Download(cuda.Bytes(d.out), d.drawn); err != nil {
			return fmt.Errorf("sample: download: %w", err)
		}
		j.record(d)
		j.stageDraws(d)
		rows, outs, maps, staged = len(j.active), 0, 0, d.host[:off[8]]
	}
	return nil
}

// draw queues sample_tokens over the r rows of logits.
func (d *cudaDecoder) draw(p *cudaPass, r int, opt SampleOptions) {
	S, V := d.cap.S, p.n.cfg.Vocab
	rows := kernels.SampleRows{Seeds: d.seeds, Completion: d.completion, Limit: d.limit, Count: d.count}
	ko := kernels.SampleOptions{Temperature: opt.Temperature, TopK: opt.TopK, TopP: opt.TopP, Greedy: opt.Greedy, EOS: opt.EOS}
	p.do(kernels.SampleTokens(p.rt, d.drawn, f32At(d.drawn, S), f32At(d.drawn, 2*S), f32At(d.drawn, 3*S), d.logit, rows, r, V, ko))
}

// forward runs rows 0..r-1 (token tok at position pos of slot slot)
// through the model, appending their keys and values to their slots'
// caches (and, in the prefill, to the maps' other slots), and writes the
// next-token logits of every row, or of rows outs[0..outs) when outs > 0,
// to logit: decoder.run's plan.
func (d *cudaDecoder) forward(p *cudaPass, r, outs, maps int) {
	n, rt := p.n, p.rt
	D, _, V, _, _, _, _, _ := p.dims()
	x, xn := d.x, d.xn
	p.do(kernels.Embed(rt, x, f32At(n.w, n.lay.embed), d.tok, r, D))
	for l := range n.cfg.Layers {
		r, x, xn = d.layer(p, l, r, outs, maps, x, xn)
	}
	xf := p.out(act(xn, r, D))
	p.do(kernels.RMSNorm(rt, xf.p, xf.h, d.inv, x, f32At(n.w, n.lay.norm), r, D, p.eps()))
	p.mm(false, true, xf, n.weight(n.lay.head, V, D), 0, d.logit)
}

// layer is block l of forward over r rows of x (xn its scratch); the last
// block runs, after the keys and values, on the outs rows only. It
// returns the rows it leaves and the buffers, swapped when it gathered.
func (d *cudaDecoder) layer(p *cudaPass, l, r, outs, maps int, x, xn cuda.Ptr) (int, cuda.Ptr, cuda.Ptr) {
	n, rt := p.n, p.rt
	D, M, _, E, H, G, qs, he := p.dims()
	lw, shape := n.lay.layers[l], kernels.DecodeShape{H: H, G: G, E: E, Tmax: d.cap.T}
	xn1 := p.out(act(xn, r, D))
	p.do(kernels.RMSNorm(rt, xn1.p, xn1.h, d.inv, x, f32At(n.w, lw.attnNorm), r, D, p.eps()))
	p.projectQKV(lw, d.qkv, xn1, 0, d.qkInv) // + Qwen2's bias, Qwen3's q/k norms (in place)
	p.do(kernels.RoPE(rt, d.qkv, d.pos, n.cos, n.sin, r, qs, H+G, E, 1))
	p.do(kernels.KVAppend(rt, d.kc[l], d.vc[l], d.qkv, d.slot, d.pos, r, shape))
	for k := range maps {
		p.do(kernels.KVAppend(rt, d.kc[l], d.vc[l], d.qkv, f32At(d.maps, k*d.stride), d.pos, r, shape))
	}
	R, rows := r, cuda.Ptr(0)
	if l == n.cfg.Layers-1 && outs > 0 {
		R, rows = outs, d.outs
		p.do(kernels.GatherRows(rt, xn, x, d.outs, R, D))
		x, xn = xn, x
	}
	p.do(kernels.DecodeAttention(rt, d.att, d.qkv, d.kc[l], d.vc[l], d.slot, d.pos, rows, R, shape))
	p.mm(false, true, act(d.att, R, he), n.weight(lw.o, D, he), 1, x)
	xn2 := p.out(act(xn, R, D))
	p.do(kernels.RMSNorm(rt, xn2.p, xn2.h, d.inv, x, f32At(n.w, lw.mlpNorm), R, D, p.eps()))
	p.mm(false, true, xn2, n.weight(lw.gateUp, 2*M, D), 0, d.gu)
	sw := p.out(act(d.act, R, M))
	p.do(kernels.SwiGLU(rt, sw.p, sw.h, 0, d.gu, R, M))
	p.mm(false, true, sw, n.weight(lw.down, D, M), 1, x)
	return R, x, xn
}

// decoder returns a decoder with room for shape s: the model's, or one
// grown to the union of the shapes seen, after checking it fits.
func (m *cudaModel) decoder(s decodeShape) (*cudaDecoder, error) {
	if m.dec != nil && m.dec.cap.fits(s) {
		return m.dec, nil
	}
	if m.dec != nil {
		s = s.union(m.dec.cap)
	}
	m.dec = nil
	m.decMem.release()
	sized := &arena{}
	newCUDADecoder(m.net, s, sized)
	what := fmt.Sprintf("sampling %d sequences of up to %d tokens", s.S, s.T)
	if err := m.dev.checkFree(what, sized.bytes); err != nil {
		return nil, err
	}
	d := newCUDADecoder(m.net, s, m.decMem)
	if err := m.decMem.err; err != nil {
		m.decMem.release()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	m.dec = d
	return d, nil
}
