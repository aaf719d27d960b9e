package gpu

import (
	"math"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// The tail of the decoder: the final norm on the K need rows, lm_head,
// the log-softmax of the logits at the temperature, the entropy and the
// target's log-prob, and their backward. It runs in blocks of need rows,
// so that no [rows, V] matrix outlives a block: for each block the logits
// are computed, reduced to per-row statistics, and dropped; the backward
// pass (last block first, whose logits are still there) computes each
// block's logits again from the final norm's output, turns them into
// their gradients in place, and adds the block's share of the lm_head
// gradient and of the final norm's input gradient. Memory is
// O(rows·hidden) plus one block of logits. Within a block the work is
// split over the workers by rows (the row reductions, the input gradient)
// or by vocabulary (the lm_head gradient, each element summed in block
// order; the logits, when BLAS computes them), so results do not depend
// on scheduling; a row's values do not depend on the block size either,
// and only the summation order of the lm_head gradient over rows does.
//
// For need row r with logits z (V values), temperature T, target t and
// upstream gradients a = dL/dlp and b = dL/dH, the tail keeps
//
//	zmax = max_v z_v,   s = Σ_v e^((z_v − zmax)/T),   lse = log s,
//	log p_v = (z_v − zmax)/T − lse,   lp = log p_t,
//	H = −Σ_v p_v·log p_v = lse − Σ_v e^((z_v − zmax)/T)·(z_v − zmax) / (T·s),
//
// and the backward pass writes, from those and the recomputed z,
//
//	dL/dz_v = (a·(1[v = t] − p_v) − b·p_v·(log p_v + H)) / T.

// tail holds the per-row results and statistics of the tail and its
// scratch; acts embeds it. The per-row arrays are indexed by row (only
// need rows are written).
type tail[F Float] struct {
	lp, ent   []F // [N]: each need row's target log-prob and entropy
	zmax, lse []F // [N]: each need row's largest logit and log Σ e^((z−zmax)/T)
	block     int // need rows per block
	logits    []F // [block, V]: a block's logits, then (backward) their gradients
	lrow      []F // [workers, V]: a row's exponentials (forward) or log-probs (backward), per worker
}

// tailBlockFloats bounds the logits of a workspace's tail blocks: 32 Mi
// values, 128 MiB in float32 (whole batches of a 98-token vocabulary; 220
// rows of 151,936: enough that BLAS packing lm_head for each block's
// products costs little next to them), shared by a batch's parts.
const tailBlockFloats = 32 << 20

// tailRows is the block of need rows of a workspace of n rows, one of
// parts of a batch, over a vocabulary of v tokens: its share of
// tailBlockFloats of logits, but at least minRowsPerWorker rows per
// worker (the products split by rows), and at most n. In float64, for the
// estimates' any dimensions.
func tailRows(v, n float64, workers, parts int) float64 {
	share := math.Floor(tailBlockFloats / max(v, 1) / float64(max(parts, 1)))
	return min(n, max(share, minRowsPerWorker*float64(max(workers, 1))))
}

// newTail allocates the tail of a workspace of n rows run by workers
// goroutines, one of parts of a batch.
func newTail[F Float](c Config, n, workers, parts int) tail[F] {
	block := int(tailRows(float64(c.Vocab), float64(n), workers, parts))
	return tail[F]{lp: make([]F, n), ent: make([]F, n), zmax: make([]F, n), lse: make([]F, n), block: block,
		logits: make([]F, block*c.Vocab), lrow: make([]F, max(workers, 1)*c.Vocab)}
}

// tailBytes is the size of newTail(c, n, workers, parts).
func tailBytes(c Config, n float64, workers, parts int) float64 {
	v := float64(c.Vocab)
	return 4 * (4*n + (tailRows(v, n, workers, parts)+float64(max(workers, 1)))*v)
}

// tailForward runs the tail on a's need rows (resid[L] holds them,
// compact): the final norm's output in xf (kept for backward), then each
// need row's target log-prob, entropy and softmax statistics at
// temperature temp.
func (n *net[F]) tailForward(a *acts[F], temp float64) {
	c, w := n.cfg, n.w
	D, V, K := c.Hidden, c.Vocab, len(a.rows)
	rmsnorm(a.xf[:K*D], a.invf[:K], a.resid[c.Layers][:K*D], w.norm, D, c.NormEps, n.workers)
	for i := range tailBlocks(K, a.block) {
		lo, hi := tailSpan(i, K, a.block)
		z := a.logits[:(hi-lo)*V]
		n.headLogits(z, a.xf[lo*D:hi*D], hi-lo)
		logSoftmaxEntropy(&a.tail, z, a.rows[lo:hi], a.targets, V, temp, n.workers)
	}
}

// tailBlocks is the number of blocks of b rows that K need rows make.
func tailBlocks(k, b int) int { return (k + b - 1) / max(b, 1) }

// tailSpan returns the need rows lo..hi-1 of block i of K in blocks of b:
// the first holds the remainder, so that the last, whose logits the
// backward pass (last block first) finds still in place, is whole.
func tailSpan(i, k, b int) (lo, hi int) {
	r := k - (tailBlocks(k, b)-1)*b
	if i == 0 {
		return 0, r
	}
	return r + (i-1)*b, r + i*b
}

// headLogits computes z = xf·lm_headᵀ for the m rows of a block. On the
// CPU through BLAS, with several workers and more vocabulary tokens than
// rows, it splits the vocabulary over the workers rather than the rows:
// each BLAS call then packs only its share of lm_head, where a split by
// rows would have each pack all of it. Each element is one dot product
// over the hidden width either way.
func (n *net[F]) headLogits(z, xf []F, m int) {
	D, V, head := n.cfg.Hidden, n.cfg.Vocab, n.w.head
	cl, ok := n.mm.(cpuLinear[F])
	if !ok || n.workers <= 1 || V <= m || (cl.pk != nil && lookup(cl.pk.nt, head) != nil) {
		n.mm.NT(z, xf, head, m, D, V, false)
		return
	}
	parallelFor(V, n.workers, func(_, lo, hi int) {
		gemm(false, true, m, hi-lo, D, 1, xf, D, head[lo*D:], D, 0, z[lo:], V)
	})
}

// tailBackward accumulates into g the gradients of lm_head and the final
// norm from the upstream gradients a.dlp and a.dH of a's need rows, and
// leaves dLoss/d resid[L] on the need rows (compact) in a.dx; tailForward
// must have run on a at temperature temp.
func (n *net[F]) tailBackward(a *acts[F], g params[F], temp float64) {
	c, w := n.cfg, n.w
	D, V, K := c.Hidden, c.Vocab, len(a.rows)
	nb := tailBlocks(K, a.block)
	for i := nb - 1; i >= 0; i-- {
		lo, hi := tailSpan(i, K, a.block)
		dz, xf := a.logits[:(hi-lo)*V], a.xf[lo*D:hi*D]
		if i < nb-1 { // the last block's logits are still there from tailForward
			n.headLogits(dz, xf, hi-lo)
		}
		logSoftmaxEntropyBackward(&a.tail, dz, a.rows[lo:hi], a.targets, a.dlp, a.dH, V, temp, n.workers)
		n.mm.TNAdd(g.head, dz, xf, hi-lo, D, V)
		n.mm.NN(a.dxn[lo*D:hi*D], dz, w.head, hi-lo, D, V, false)
	}
	clear(a.dx[:K*D])
	rmsnormBackward(a.dx[:K*D], g.norm, a.dxn[:K*D], a.resid[c.Layers][:K*D], a.invf[:K], w.norm, D, n.workers)
}

// logSoftmaxEntropy reduces the logits z of rows rows ([len(rows), v],
// compact) to each row's target log-prob, entropy and softmax statistics
// at temperature temp, written to t at the row's index.
func logSoftmaxEntropy[F Float](t *tail[F], z []F, rows, targets []int32, v int, temp float64, workers int) {
	inv := F(1 / temp)
	if workers <= 1 {
		logSoftmaxEntropyRows(t, z, rows, targets, v, inv, 0, 0, len(rows))
		return
	}
	parallelFor(len(rows), workers, func(chunk, lo, hi int) { logSoftmaxEntropyRows(t, z, rows, targets, v, inv, chunk, lo, hi) })
}

// logSoftmaxEntropyRows is logSoftmaxEntropy over rows lo..hi-1, on the
// calling goroutine, with scratch row chunk.
func logSoftmaxEntropyRows[F Float](t *tail[F], z []F, rows, targets []int32, v int, inv F, chunk, lo, hi int) {
	e := t.lrow[chunk*v : (chunk+1)*v]
	for i := lo; i < hi; i++ {
		r := int(rows[i])
		t.lp[r], t.ent[r], t.zmax[r], t.lse[r] = softmaxRow(z[i*v:(i+1)*v], e, int(targets[r]), inv)
	}
}

// softmaxRow returns, for one row of logits z at 1/T = inv, the
// log-prob of token target, the entropy, the largest logit and
// log Σ e^((z−max)/T); e ([len(z)]) is scratch. With e_v = e^((z_v−max)/T)
// and s = Σ e_v (row-stable: the maximum is subtracted before the
// exponentials), H = log s − Σ e_v·(z_v − max) / (T·s): two terms ≥ 0,
// both sums in float64, so the entropy of a large vocabulary keeps float32
// accuracy.
func softmaxRow[F Float](z, e []F, target int, inv F) (lp, h, mx, lse F) {
	mx = rowMax(z)
	sum := expShiftRow(e, z, mx, inv)
	l := math.Log(sum)
	lse = F(l)
	return (z[target]-mx)*inv - lse, F(l - float64(inv)*shiftedDot(e, z, mx)/sum), mx, lse
}

// shiftedDot returns Σ e_j·(z_j − mx) in float64, in four interleaved
// partial sums (each term rounded to F: at most one rounding per term).
func shiftedDot[F Float](e, z []F, mx F) float64 {
	e = e[:len(z)]
	var s0, s1, s2, s3 float64
	j := 0
	for ; j+4 <= len(z); j += 4 {
		s0 += float64(e[j] * (z[j] - mx))
		s1 += float64(e[j+1] * (z[j+1] - mx))
		s2 += float64(e[j+2] * (z[j+2] - mx))
		s3 += float64(e[j+3] * (z[j+3] - mx))
	}
	for ; j < len(z); j++ {
		s0 += float64(e[j] * (z[j] - mx))
	}
	return (s0 + s1) + (s2 + s3)
}

// logSoftmaxEntropyBackward writes the gradients of the logits of rows
// rows ([len(rows), v], compact) from the upstream gradients dlp (of the
// target's log-prob) and dH (of the entropy) of each row: the formula
// above, with the statistics t kept. dz holds the logits on entry (those
// of logSoftmaxEntropy) and their gradients on return: in place, as rope
// works, because it is the tail's own block buffer and a second one would
// double the block's memory. Rows with both gradients zero get zeros.
func logSoftmaxEntropyBackward[F Float](t *tail[F], dz []F, rows, targets []int32, dlp, dH []float64, v int, temp float64, workers int) {
	inv := F(1 / temp)
	if workers <= 1 {
		logSoftmaxEntropyBackwardRows(t, dz, rows, targets, dlp, dH, v, inv, 0, 0, len(rows))
		return
	}
	parallelFor(len(rows), workers, func(chunk, lo, hi int) {
		logSoftmaxEntropyBackwardRows(t, dz, rows, targets, dlp, dH, v, inv, chunk, lo, hi)
	})
}

// logSoftmaxEntropyBackwardRows is logSoftmaxEntropyBackward over rows
// lo..hi-1, on the calling goroutine, with scratch row chunk.
func logSoftmaxEntropyBackwardRows[F Float](t *tail[F], dz []F, rows, targets []int32, dlp, dH []float64, v int, inv F, chunk, lo, hi int) {
	l := t.lrow[chunk*v : (chunk+1)*v]
	for i := lo; i < hi; i++ {
		r := int(rows[i])
		row := dz[i*v : (i+1)*v]
		a, b := F(dlp[r]), F(dH[r])
		if a == 0 && b == 0 {
			clear(row)
			continue
		}
		softmaxRowBackward(row, l, a, b, t.ent[r], t.zmax[r], t.lse[r], inv)
		row[targets[r]] += a * inv
	}
}

// softmaxRowBackward overwrites one row's logits dz with
// −(a·p + b·p·(log p + h))/T, their gradient but for the target's term
// (in place, as logSoftmaxEntropyBackward); l ([len(dz)]) is scratch.
func softmaxRowBackward[F Float](dz, l []F, a, b, h, mx, lse, inv F) {
	if is32[F]() { // dz = p·(c0 + c1·log p) with p = e^(log p)
		for j, x := range dz {
			l[j] = (x-mx)*inv - lse
		}
		z32, l32 := as32(dz), as32(l[:len(dz)])
		vec.ExpShift(z32, l32, 0, 1)
		vec.MulAffine(z32, l32, z32, float32(-(a+b*h)*inv), float32(-b*inv))
		return
	}
	for j, x := range dz {
		lj := (x-mx)*inv - lse
		p := expF(lj)
		dz[j] = (-a*p - b*p*(lj+h)) * inv
	}
}
