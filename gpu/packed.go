package gpu

import "github.com/mgrpo/mgrpo/gpu/internal/panel"

// packedWeights holds a float32 net's weight matrices packed once for the
// kernel of internal/panel, so that no product packs them again (a BLAS
// call packs its operands on every call): for x·wᵀ, and for a learner
// also for dy·w. A net has them when the kernel runs on this CPU and
// every matrix fits (panel.Fits); the learner repacks after each update.
type packedWeights struct {
	list []packedMatrix             // every weight, in matrixShapes' order
	nt   map[*float32]*panel.Matrix // keyed by the weight's first element: B = wᵀ
	nn   map[*float32]*panel.Matrix // B = w (nil unless packed for backward)
}

// packedMatrix is one weight and its packings (nn nil without backward).
type packedMatrix struct {
	w      []float32
	nt, nn *panel.Matrix
}

// add records weight w with its packings.
func (p *packedWeights) add(w []float32, nt, nn *panel.Matrix) {
	p.list = append(p.list, packedMatrix{w, nt, nn})
	p.nt[&w[0]] = nt
	if nn != nil {
		p.nn[&w[0]] = nn
	}
}

// matrix is one weight matrix of a net, [out, in].
type matrix[F Float] struct {
	w       []F
	out, in int
}

// matrixShapes lists the [out, in] of every weight matrix: q/k/v, o,
// gate/up and down of each layer, then lm_head.
func (c Config) matrixShapes() [][2]int {
	qs, he := (c.Heads+2*c.KVHeads)*c.HeadDim(), c.Heads*c.HeadDim()
	var s [][2]int
	for range c.Layers {
		s = append(s, [2]int{qs, c.Hidden}, [2]int{c.Hidden, he}, [2]int{2 * c.MLP, c.Hidden}, [2]int{c.Hidden, c.MLP})
	}
	return append(s, [2]int{c.Vocab, c.Hidden})
}

// matrices lists the net's weight matrices in matrixShapes' order.
func (n *net[F]) matrices() []matrix[F] {
	var ws [][]F
	for _, lw := range n.w.layers {
		ws = append(ws, lw.qkv, lw.o, lw.gateUp, lw.down)
	}
	ws = append(ws, n.w.head)
	ms := make([]matrix[F], len(ws))
	for i, s := range n.cfg.matrixShapes() {
		ms[i] = matrix[F]{ws[i], s[0], s[1]}
	}
	return ms
}

// packable reports whether pack packs the weights of a float32 net of
// configuration c: the kernel runs here and every matrix fits, both ways.
func packable(c Config) bool {
	if !panel.Available() {
		return false
	}
	for _, s := range c.matrixShapes() {
		if !panel.Fits(s[1], s[0]) || !panel.Fits(s[0], s[1]) {
			return false
		}
	}
	return true
}

// packedBytes is the memory of pack's copies of the weights: for x·wᵀ
// (every net that packs) and for dy·w (a learner's); 0 when c is not
// packable.
func packedBytes(c Config) (nt, nn float64) {
	if !packable(c) {
		return 0, 0
	}
	for _, s := range c.matrixShapes() {
		nt += float64(panel.Bytes(s[1], s[0]))
		nn += float64(panel.Bytes(s[0], s[1]))
	}
	return nt, nn
}

// pack gives n packed weights (for the backward products too when
// backward) if packable; otherwise n keeps running every product through
// BLAS.
func (n *net[F]) pack(backward bool) {
	if !is32[F]() || !packable(n.cfg) {
		return
	}
	p := &packedWeights{nt: map[*float32]*panel.Matrix{}}
	if backward {
		p.nn = map[*float32]*panel.Matrix{}
	}
	for _, m := range n.matrices() {
		var nn *panel.Matrix
		if backward {
			nn = panel.New(m.out, m.in)
		}
		p.add(as32(m.w), panel.New(m.in, m.out), nn)
	}
	n.pk = p
	n.mm = cpuLinear[F]{n.workers, p}
	n.repack()
}

// packLike gives n, whose weights are a copy of src's, the packing of
// src's for x·wᵀ, copied rather than packed again (a snapshot of a
// learner); without src, or if src has none, it packs.
func (n *net[F]) packLike(src *net[F]) {
	if src == nil || src.pk == nil || !is32[F]() {
		n.pack(false)
		return
	}
	p := &packedWeights{nt: map[*float32]*panel.Matrix{}}
	for i, m := range n.matrices() {
		p.add(as32(m.w), src.pk.list[i].nt.Clone(), nil)
	}
	n.pk = p
	n.mm = cpuLinear[F]{n.workers, p}
}

// repack packs n's current weights; it must run after every change to
// them, before the next product.
func (n *net[F]) repack() {
	if n.pk == nil {
		return
	}
	ms := n.pk.list
	parallelFor(len(ms), n.workers, func(_, lo, hi int) {
		for _, m := range ms[lo:hi] {
			m.nt.SetT(m.w)
			if m.nn != nil {
				m.nn.Set(m.w)
			}
		}
	})
}

// lookup returns the packing of weight w in set, nil if there is none.
func lookup[F Float](set map[*float32]*panel.Matrix, w []F) *panel.Matrix {
	if set == nil || len(w) == 0 {
		return nil
	}
	return set[&as32(w)[0]]
}

// mulPacked computes dst = a·B (+ dst when accumulate) for the n rows of
// a, split by rows over workers.
func mulPacked[F Float](b *panel.Matrix, dst, a []F, n int, accumulate bool, workers int) {
	d, x := as32(dst), as32(a)
	k, m := b.K(), b.N()
	if workers <= 1 {
		b.Mul(d, x, n, accumulate)
		return
	}
	splitRows(n, workers, func(lo, hi int) {
		b.Mul(d[lo*m:hi*m], x[lo*k:hi*k], hi-lo, accumulate)
	})
}
