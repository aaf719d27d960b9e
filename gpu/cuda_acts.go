//go:build cuda || cudaemu

package gpu

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// cudaShape is the room of a workspace: N rows, K need rows, B sequences
// (planRows' counts).
type cudaShape struct{ N, K, B int }

func (s cudaShape) fits(t cudaShape) bool { return t.N <= s.N && t.K <= s.K && t.B <= s.B }

func (s cudaShape) union(t cudaShape) cudaShape {
	return cudaShape{N: max(s.N, t.N), K: max(s.K, t.K), B: max(s.B, t.B)}
}

// planShape is the shape of a planned pass.
func planShape(p *rowPlan) cudaShape {
	return cudaShape{N: len(p.tokens), K: len(p.rows), B: len(p.start) - 1}
}

// headBudget bounds the logits of one lm_head block, in floats (256 MiB;
// cudaNet.headBudget, which tests lower): need rows go through the head in
// blocks of at most headBudget/V rows, so a large vocabulary never holds a
// [K, V] matrix (the backward pass recomputes a block's logits when there
// are several).
const headBudget = 1 << 26

// cudaActs is a workspace on the device: the plan of a pass and every
// activation its backward pass reads (train), or one layer's worth shared
// by all (scoring). Its buffers are sized for a shape and reused by every
// pass that fits; the rows in use are the first, as planRows lays them
// out. The last block after attention, the final norm and the head hold
// the K need rows only, compacted in row order (model.go's forward).
type cudaActs struct {
	cap      cudaShape
	train    bool
	headRows int // need rows of one lm_head block
	cap16    int // elements of each bf16 scratch (bf16 products), else 0

	N, K, B, T, U int // the loaded pass: rows, need rows, sequences, most rows of one, distinct tokens (train)

	plan                                                    cuda.Ptr // int32s: the pass's plan, one upload
	tokens, pos, start, pre, from, rows, targets            cuda.Ptr // views of plan
	tokRows, tokOff, tokUniq                                cuda.Ptr // the embedding gradient's grouping (kernels.TokenRows)
	resid                                                   []cuda.Ptr
	xn1, inv1, qkv, att, lse, mid, xn2, inv2, gu, act, sig  []cuda.Ptr // per layer (shared when scoring)
	qkRaw, qkInv                                            []cuda.Ptr // per layer (Qwen3): q/k heads before the norm (train), 1/rms; else 0
	xn1h, atth, xn2h, acth                                  []cuda.Ptr // per layer (train, bf16 products): bf16 copies of xn1, att, xn2, act; else nil
	attRows, xf, invf, logits, stats                        cuda.Ptr   // stats: [6, cap.K] logp, ent, rowmax, rowlse, dlp, dH
	dx, dx2, dxn, dqkv, datt, dattK, dgu, dact, delta, part cuda.Ptr   // backward scratch (train)
	s16                                                     [2]cuda.Ptr
	host                                                    []int32   // the plan's staging
	out                                                     []float32 // logp, ent staging: [2, cap.K]
	mem                                                     *arena
}

// Per-row stats of the need rows: stat(i, k) is row k of stats[i].
const (
	statLogp = iota
	statEnt
	statMax
	statLse
	statDlp
	statDH
	statCount
)

func (a *cudaActs) stat(i, k int) cuda.Ptr { return f32At(a.stats, i*a.cap.K+k) }

// planOffsets are where tokens, pos, start, pre, from, rows, targets,
// tokRows, tokOff and tokUniq start in the plan buffer, and its length.
func planOffsets(s cudaShape) (off [10]int, n int) {
	sizes := [10]int{s.N, s.N, s.B + 1, s.B, s.B, s.K, s.K, s.N, s.N + 1, s.N}
	for i, sz := range sizes {
		off[i] = n
		n += sz
	}
	return off, n
}

// newCUDAActs returns the workspace of shape s for net n (sized only,
// nothing allocated, when mem has no device).
func newCUDAActs(n *cudaNet, s cudaShape, train bool, mem *arena) *cudaActs {
	c := n.cfg
	a := &cudaActs{cap: s, train: train, mem: mem, headRows: max(min(s.K, n.headBudget/c.Vocab), 1)}
	if n.dev.math == cuda.MathBF16 {
		e := c.HeadDim()
		widest := max(c.Hidden, c.Heads*e, (c.Heads+2*c.KVHeads)*e, 2*c.MLP)
		a.cap16 = max(s.N*widest, a.headRows*max(c.Vocab, c.Hidden))
	}
	a.layoutPlan(mem)
	a.layoutLayers(c, mem)
	a.layoutHead(c, mem)
	if train {
		a.layoutScratch(c, mem)
	}
	if train && a.cap16 > 0 {
		a.layoutSaved16(c, mem)
	}
	for i := range a.s16 {
		if a.cap16 > 0 {
			a.s16[i] = mem.bf16(a.cap16)
		}
	}
	return a
}

// workspace returns cur if it has room for shape s, or else a workspace
// (train: for the backward pass too) in mem for the union of s and cur's
// shape, so that passes of alternating shapes settle on one; it frees
// cur and checks the new one fits in the device's free memory first.
// what names the pass in a refusal. On error it returns nil.
func (n *cudaNet) workspace(cur *cudaActs, mem *arena, s cudaShape, train bool, what string) (*cudaActs, error) {
	if cur != nil && cur.cap.fits(s) {
		return cur, nil
	}
	if cur != nil {
		s = s.union(cur.cap)
	}
	mem.release()
	sized := &arena{}
	newCUDAActs(n, s, train, sized)
	if err := n.dev.checkFree(what, sized.bytes); err != nil {
		return nil, err
	}
	ws := newCUDAActs(n, s, train, mem)
	if mem.err != nil {
		err := mem.err
		mem.release()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ws, nil
}

func (a *cudaActs) layoutPlan(mem *arena) {
	off, n := planOffsets(a.cap)
	a.plan = mem.i32(n)
	at := func(i int) cuda.Ptr { return f32At(a.plan, off[i]) }
	a.tokens, a.pos, a.start, a.pre, a.from = at(0), at(1), at(2), at(3), at(4)
	a.rows, a.targets, a.tokRows, a.tokOff, a.tokUniq = at(5), at(6), at(7), at(8), at(9)
	if mem.dev != nil {
		a.host = make([]int32, n)
		a.out = make([]float32, 2*a.cap.K)
	}
}

// layoutLayers takes the per-layer buffers: one set per layer to train,
// one shared set (the residual stream alternating between two) to score.
func (a *cudaActs) layoutLayers(c Config, mem *arena) {
	N, D, M, L, e := a.cap.N, c.Hidden, c.MLP, c.Layers, c.HeadDim()
	qs, he := (c.Heads+2*c.KVHeads)*e, c.Heads*e
	perLayer := func(n int) []cuda.Ptr {
		s := make([]cuda.Ptr, L)
		for i := range s {
			if a.train || i == 0 {
				s[i] = mem.f32(n)
			} else {
				s[i] = s[0]
			}
		}
		return s
	}
	a.resid = make([]cuda.Ptr, L+1)
	for i := range a.resid {
		if a.train || i < 2 {
			a.resid[i] = mem.f32(N * D)
		} else {
			a.resid[i] = a.resid[i%2]
		}
	}
	a.xn1, a.inv1, a.qkv, a.att, a.lse = perLayer(N*D), perLayer(N), perLayer(N*qs), perLayer(N*he), perLayer(N*c.Heads)
	a.mid, a.xn2, a.inv2, a.gu, a.act = perLayer(N*D), perLayer(N*D), perLayer(N), perLayer(N*2*M), perLayer(N*M)
	a.sig = make([]cuda.Ptr, L) // scoring keeps no sigmoid (nil: the kernel's scratch-free path)
	if a.train {
		a.sig = perLayer(N * M)
	}
	a.qkRaw, a.qkInv = make([]cuda.Ptr, L), make([]cuda.Ptr, L)
	if heads := c.Heads + c.KVHeads; c.QKNorm() {
		a.qkInv = perLayer(N * heads)
		if a.train { // scoring norms in place and keeps nothing
			a.qkRaw = perLayer(N * heads * e)
		}
	}
}

// layoutSaved16 takes a training workspace's per-layer bf16 copies of the
// activations that a forward product reads and the backward pass reads
// again for a weight gradient (xn1, att, xn2, act: cudaPass.saved), so
// that each is rounded once a step.
func (a *cudaActs) layoutSaved16(c Config, mem *arena) {
	N, L := a.cap.N, c.Layers
	perLayer := func(n int) []cuda.Ptr {
		s := make([]cuda.Ptr, L)
		for i := range s {
			s[i] = mem.bf16(n)
		}
		return s
	}
	a.xn1h, a.atth = perLayer(N*c.Hidden), perLayer(N*c.Heads*c.HeadDim())
	a.xn2h, a.acth = perLayer(N*c.Hidden), perLayer(N*c.MLP)
}

func (a *cudaActs) layoutHead(c Config, mem *arena) {
	K, D := a.cap.K, c.Hidden
	a.attRows = mem.f32(K * c.Heads * c.HeadDim())
	a.xf, a.invf = mem.f32(K*D), mem.f32(K)
	a.logits = mem.f32(a.headRows * c.Vocab)
	a.stats = mem.f32(statCount * K)
}

func (a *cudaActs) layoutScratch(c Config, mem *arena) {
	N, K, D, M, e := a.cap.N, a.cap.K, c.Hidden, c.MLP, c.HeadDim()
	qs, he := (c.Heads+2*c.KVHeads)*e, c.Heads*e
	a.dx, a.dx2, a.dxn = mem.f32(N*D), mem.f32(N*D), mem.f32(N*D)
	a.dqkv, a.datt, a.dattK = mem.f32(N*qs), mem.f32(N*he), mem.f32(K*he)
	a.dgu, a.dact, a.delta = mem.f32(N*2*M), mem.f32(N*M), mem.f32(N*c.Heads)
	a.part = mem.f32(kernels.NormPartRows(N) * partCols(c))
}

// load stages the plan p of a pass (it must fit the workspace) and
// uploads it in one copy; train adds the embedding gradient's grouping of
// rows by token.
func (a *cudaActs) load(rt cuda.Runtime, p *rowPlan, train bool) error {
	s := planShape(p)
	a.N, a.K, a.B, a.T, a.U = s.N, s.K, s.B, 0, 0
	for b := 0; b < s.B; b++ {
		a.T = max(a.T, int(p.start[b+1]-p.start[b]))
	}
	off, _ := planOffsets(a.cap)
	h := a.host
	for i, src := range [][]int32{p.tokens, p.pos, p.start, p.pre, p.from, p.rows} {
		copy(h[off[i]:], src)
	}
	for k, r := range p.rows {
		h[off[6]+k] = p.targets[r]
	}
	if train {
		rows, offsets, uniq := kernels.TokenRows(p.tokens)
		copy(h[off[7]:], rows)
		copy(h[off[8]:], offsets)
		copy(h[off[9]:], uniq)
		a.U = len(uniq)
	}
	if err := rt.Upload(a.plan, cuda.Bytes(h)); err != nil {
		return fmt.Errorf("upload the row plan: %w", err)
	}
	return nil
}

// outputs downloads the need rows' target log-probs and entropies and
// writes them to their slots of lp and ent ([B·Width]), zeros elsewhere.
func (a *cudaActs) outputs(rt cuda.Runtime, slots []int32, lp, ent []float64) error {
	clear(lp)
	clear(ent)
	if a.K == 0 {
		return nil
	}
	out := a.out[:a.cap.K+a.K]
	if err := rt.Download(cuda.Bytes(out), a.stats); err != nil {
		return fmt.Errorf("download log-probs: %w", err)
	}
	for k, s := range slots {
		lp[s], ent[s] = float64(out[k]), float64(out[a.cap.K+k])
	}
	return nil
}

// upstream uploads each need row's upstream gradients from its slot of
// dlp and dH (nil: zeros) into stats' dlp and dH rows.
func (a *cudaActs) upstream(rt cuda.Runtime, slots []int32, dlp, dH []float64) error {
	up := make([]float32, 2*a.cap.K)
	for k, s := range slots {
		up[k] = float32(dlp[s])
		if dH != nil {
			up[a.cap.K+k] = float32(dH[s])
		}
	}
	if err := rt.Upload(a.stat(statDlp, 0), cuda.Bytes(up)); err != nil {
		return fmt.Errorf("upload upstream gradients: %w", err)
	}
	return nil
}
