package gpu

// Dimensions: B sequences of at most T rows, N ≤ B·T rows in use (packed), D hidden, L layers,
// H query heads, G key/value heads, E head width (D/H unless Config.HeadWidth), M MLP width, V vocab.

// net is the Llama decoder over one flat weight buffer, generic so that the
// float64 gradient checks run exactly the float32 production code.
type net[F Float] struct {
	cfg      Config
	w        params[F]
	cos, sin []F            // RoPE table: [Context, E/2] each
	workers  int            // goroutines for the row-wise kernels
	mm       linear[F]      // the weight products: on the CPU unless a device was set
	pk       *packedWeights // the weights packed for the CPU's products (pack), or nil
}

func newNet[F Float](cfg Config, flat []F, workers int) *net[F] {
	cos, sin := ropeTable[F](cfg.Context, cfg.HeadDim(), cfg.RopeTheta, cfg.RopeScaling)
	workers = max(workers, 1)
	return &net[F]{cfg: cfg, w: bindParams(cfg, flat), cos: cos, sin: sin, workers: workers, mm: cpuLinear[F]{workers: workers}}
}

func (n *net[F]) attnShape(a *acts[F]) attnShape {
	c := n.cfg
	return attnShape{B: len(a.start) - 1, T: a.T, H: c.Heads, G: c.KVHeads, E: c.HeadDim(), start: a.start, pre: a.pre, from: a.from}
}

// acts is the workspace of B sequences of at most T rows each: every
// activation the backward pass needs, plus scratch for the gradients. It
// is allocated once per shape (B, T), room for B·T rows, and reused by
// every step of that shape. Its rows are laid out by its row plan (load,
// plan.go): the N rows in use are the first, none is padding, and a
// sequence whose prompt is its predecessor's shares that prompt's rows.
type acts[F Float] struct {
	B, T int // room for B sequences of T rows
	N    int // rows in use
	rowPlan
	resid   [][]F     // L+1 × [N, D]: input of each block; resid[L] is the output
	mid     [][]F     // L × [N, D]: residual after attention
	xn1     [][]F     // L × [N, D]: input_layernorm output
	inv1    [][]F     // L × [N]: its 1/rms
	qkv     [][]F     // L × [N, (H+2G)·E]: projections (+ bias), q and k normed (Qwen3) and rotated
	qkRaw   [][]F     // L × [N, (H+G)·E]: Qwen3's q and k heads before their norm (train only), else nil
	qkInv   [][]F     // L × [N, H+G]: the 1/rms of each of them (Qwen3), else nil
	probs   [][]F     // L × [B, H, T, T]: causal attention probabilities
	att     [][]F     // L × [N, H·E]: attention output before o_proj
	xn2     [][]F     // L × [N, D]: post_attention_layernorm output
	inv2    [][]F     // L × [N]
	gu      [][]F     // L × [N, 2M]: gate and up projections
	act     [][]F     // L × [N, M]: silu(gate)·up
	sig     [][]F     // L × [N, M]: sigmoid(gate); forward-only: a scratch row per worker
	attRows []F       // [K, H·E]: the last block's attention output on the K need rows
	xf      []F       // [K, D]: final norm output (need rows)
	invf    []F       // [K]
	tail[F]           // per need row: target log-prob, entropy, softmax statistics; a block of logits (tail.go)
	dlp, dH []float64 // [N]: upstream gradients per row (zero where unused)

	// backward scratch, shared by all layers
	dx, dxn, dqkv, datt, dgu, dact, dscores []F
	dqk                                     []F // [workers, E]: qkNormBackward's scratch (Qwen3)
	ones                                    []F // [N] of 1: the q/k/v bias gradient's column sum (Qwen2)
}

// The last block after attention (o_proj, its residual, the MLP), the final
// norm and lm_head run only on the need rows: no loss reads the others'
// outputs, which only the later positions' attention (the keys and values,
// computed for every row) depends on. Their buffers (mid, xn2, inv2, gu,
// act, sig of the last layer, resid[L], xf, invf) hold the K need rows
// first, compacted in row order.

// newActs allocates the workspace of shape (b, t). With train false it is
// a forward-only (scoring) workspace: every layer shares one set of buffers
// and the residual stream alternates between two, so it takes about 1/L of
// the memory; backward must not be run on it.
func newActs[F Float](c Config, b, t, workers int, train bool) *acts[F] {
	return newPart[F](c, b, t, workers, 1, train)
}

// newPart is newActs for one of parts workspaces of a batch, which share
// the tail's budget of logits (tailRows).
func newPart[F Float](c Config, b, t, workers, parts int, train bool) *acts[F] {
	n, d, m := b*t, c.Hidden, c.MLP
	qs, he := (c.Heads+2*c.KVHeads)*c.HeadDim(), c.Heads*c.HeadDim()
	mk := func(k int) []F { return make([]F, k) }
	mkL := func(k int) [][]F {
		s := make([][]F, c.Layers)
		for i := range s {
			if train || i == 0 {
				s[i] = mk(k)
			} else {
				s[i] = s[0]
			}
		}
		return s
	}
	plan := rowPlan{start: make([]int32, b+1), pre: make([]int32, b), from: make([]int32, b), tokens: make([]int32, n), pos: make([]int32, n),
		targets: make([]int32, n), need: make([]bool, n), rows: make([]int32, 0, n), slots: make([]int32, 0, n)}
	a := &acts[F]{B: b, T: t, N: n, rowPlan: plan, mid: mkL(n * d), xn1: mkL(n * d), inv1: mkL(n), qkv: mkL(n * qs),
		probs: mkL(b * c.Heads * t * t), att: mkL(n * he), xn2: mkL(n * d), inv2: mkL(n), gu: mkL(n * 2 * m),
		act: mkL(n * m), sig: mkL(sigLen(n, m, workers, train)), attRows: mk(n * he), xf: mk(n * d), invf: mk(n), tail: newTail[F](c, n, workers, parts)}
	a.resid = make([][]F, c.Layers+1)
	for i := range a.resid {
		if train || i < 2 {
			a.resid[i] = mk(n * d)
		} else {
			a.resid[i] = a.resid[i%2]
		}
	}
	if train {
		a.dlp, a.dH = make([]float64, n), make([]float64, n)
		a.dx, a.dxn, a.dqkv, a.datt = mk(n*d), mk(n*d), mk(n*qs), mk(n*he)
		a.dgu, a.dact, a.dscores = mk(n*2*m), mk(n*m), mk(max(workers, 1)*t*t)
	}
	a.addArch(c, n, workers, train, mkL)
	for r := range a.pos { // until load plans them: every sequence T rows
		a.pos[r] = int32(r % t)
	}
	for i := range a.start {
		a.start[i] = int32(i * t)
	}
	return a
}

// addArch allocates the buffers of Qwen3's q/k norms (the heads before
// the norm only to train) and, to train a Qwen2, the bias gradient's ones.
func (a *acts[F]) addArch(c Config, n, workers int, train bool, mkL func(int) [][]F) {
	s := headShape{c.Heads, c.KVHeads, c.HeadDim()}
	if c.QKNorm() {
		a.qkInv, a.qkRaw = mkL(n*(s.H+s.G)), make([][]F, c.Layers) // forward-only: normed in place
		if train {
			a.qkRaw, a.dqk = mkL(n*s.qk()), make([]F, max(workers, 1)*s.E)
		}
	}
	if c.QKVBias() && train {
		a.ones = make([]F, n)
		for i := range a.ones {
			a.ones[i] = 1
		}
	}
}

// sigLen is the length of each layer's sigmoid buffer: every row's for
// the backward pass, or, forward-only, one scratch row per worker.
func sigLen(n, m, workers int, train bool) int {
	if train {
		return n * m
	}
	return max(workers, 1) * m
}

// forward runs the decoder on a.tokens and leaves, for every row marked in
// a.need, the log-probability of its target at temperature temp in a.lp
// and the entropy of its next-token distribution in a.ent (nanoGPT's
// forward, every activation kept for backward; the tail in tail.go).
func (n *net[F]) forward(a *acts[F], temp float64) {
	c, w, k := n.cfg, n.w, n.workers
	N, D, M := a.N, c.Hidden, c.MLP
	as := n.attnShape(a)
	qs, he := as.stride(), as.H*as.E
	a.rows = a.rows[:0]
	for r, need := range a.need[:N] {
		if need {
			a.rows = append(a.rows, int32(r))
		}
	}
	K := len(a.rows)
	rot := &rotation[F]{pos: a.pos, cos: n.cos, sin: n.sin}
	embed(a.resid[0], w.embed, a.tokens[:N], D)
	for l, lw := range w.layers {
		x := a.resid[l][:N*D]
		rmsnorm(a.xn1[l], a.inv1[l], x, lw.attnNorm, D, c.NormEps, k)
		projectQKV(n.mm, a.qkv[l], a.xn1[l], lw, N, D, qs) // + Qwen2's bias
		if lw.qNorm != nil {                               // Qwen3
			qkNorm(a.qkv[l], a.qkRaw[l], a.qkInv[l], lw.qNorm, lw.kNorm, as.heads(), N, c.NormEps, k)
		}
		attention(a.att[l], a.probs[l], a.qkv[l], as, rot, k) // rotates q and k first
		// R rows go on from here, att their attention output
		R, att := N, a.att[l]
		if l == c.Layers-1 {
			R, att = K, a.attRows[:K*he]
			gatherRows(att, a.att[l], a.rows, he)
			gatherRows(a.mid[l], x, a.rows, D)
		} else {
			copy(a.mid[l], x)
		}
		n.mm.NT(a.mid[l], att, lw.o, R, he, D, true) // mid = x + o_proj(att)
		rmsnorm(a.xn2[l][:R*D], a.inv2[l][:R], a.mid[l][:R*D], lw.mlpNorm, D, c.NormEps, k)
		n.mm.NT(a.gu[l], a.xn2[l], lw.gateUp, R, D, 2*M, false)
		swiglu(a.act[l][:R*M], a.sig[l], a.gu[l][:R*2*M], M, k)
		copy(a.resid[l+1][:R*D], a.mid[l][:R*D])
		n.mm.NT(a.resid[l+1], a.act[l], lw.down, R, M, D, true) // x' = mid + down_proj(act)
	}
	n.tailForward(a, temp)
}

// backward accumulates into g the gradient of a loss whose derivatives wrt
// each row's target log-prob and entropy are a.dlp and a.dH; forward must
// have run on a with the same temperature. Rows outside a.need must have
// zero derivatives.
func (n *net[F]) backward(a *acts[F], g params[F], temp float64) {
	c, w, k := n.cfg, n.w, n.workers
	N, D, M := a.N, c.Hidden, c.MLP
	as := n.attnShape(a)
	qs, he := as.stride(), as.H*as.E
	K := len(a.rows)
	rot := &rotation[F]{pos: a.pos, cos: n.cos, sin: n.sin}
	n.tailBackward(a, g, temp)
	for l := c.Layers - 1; l >= 0; l-- { // a.dx holds dLoss/d resid[l+1] (the need rows for the last block)
		lw, lg := w.layers[l], g.layers[l]
		R, att := N, a.att[l]
		if l == c.Layers-1 {
			R, att = K, a.attRows[:K*he]
		}
		n.mm.TNAdd(lg.down, a.dx, a.act[l], R, M, D)
		n.mm.NN(a.dact, a.dx, lw.down, R, M, D, false)
		swigluBackward(a.dgu[:R*2*M], a.dact[:R*M], a.gu[l][:R*2*M], a.sig[l], M, k)
		n.mm.TNAdd(lg.gateUp, a.dgu, a.xn2[l], R, D, 2*M)
		n.mm.NN(a.dxn, a.dgu, lw.gateUp, R, D, 2*M, false)
		rmsnormBackward(a.dx[:R*D], lg.mlpNorm, a.dxn[:R*D], a.mid[l][:R*D], a.inv2[l][:R], lw.mlpNorm, D, k) // now dLoss/d mid
		n.mm.TNAdd(lg.o, a.dx, att, R, he, D)
		n.mm.NN(a.datt, a.dx, lw.o, R, he, D, false)
		if R < N { // back to every row: the others get gradients through attention only
			scatterRows(a.datt, R, a.rows, he, N)
			scatterRows(a.dx, R, a.rows, D, N)
		}
		attentionBackward(a.dqkv, a.datt, a.qkv[l], a.probs[l], a.dscores, as, rot, k) // dq, dk unrotated
		if lw.qNorm != nil {
			qkNormBackward(a.dqkv, lg.qNorm, lg.kNorm, a.qkRaw[l], a.qkInv[l], lw.qNorm, lw.kNorm, a.dqk, as.heads(), N, k)
		}
		if lg.qkvBias != nil {
			biasBackward(lg.qkvBias, a.dqkv[:N*qs], a.ones, N)
		}
		n.mm.TNAdd(lg.qkv, a.dqkv, a.xn1[l], N, D, qs)
		n.mm.NN(a.dxn, a.dqkv, lw.qkv, N, D, qs, false)
		rmsnormBackward(a.dx[:N*D], lg.attnNorm, a.dxn[:N*D], a.resid[l][:N*D], a.inv1[l][:N], lw.attnNorm, D, k) // dLoss/d resid[l]
	}
	embedBackward(g.embed, a.dx, a.tokens[:N], D)
}

// gatherRows copies rows rows of src ([*, d]) to the first len(rows) rows
// of dst.
func gatherRows[F Float](dst, src []F, rows []int32, d int) {
	for i, r := range rows {
		copy(dst[i*d:(i+1)*d], src[int(r)*d:(int(r)+1)*d])
	}
}

// scatterRows spreads, in place, the first k rows of x ([n, d]) to rows
// rows[0..k) (ascending, so row i moves to rows[i] ≥ i: the last first) and
// zeros every other row.
func scatterRows[F Float](x []F, k int, rows []int32, d, n int) {
	next := n // rows [rows[i]+1, next) are zeroed
	for i := k - 1; i >= 0; i-- {
		r := int(rows[i])
		clear(x[(r+1)*d : next*d])
		copy(x[r*d:(r+1)*d], x[i*d:(i+1)*d])
		next = r
	}
	clear(x[:next*d])
}

// load plans seqs into the workspace (planRows; their slots with the
// width of the longest completion).
func (a *acts[F]) load(seqs []Sequence, share bool) {
	planRows(&a.rowPlan, seqs, 0, Batch{Seqs: seqs}.width(), share)
	a.N = len(a.tokens)
}

// outputs writes, after a forward pass, each need row's target log-prob
// and entropy to its slot of lp and ent.
func (a *acts[F]) outputs(lp, ent []float64) {
	for k, r := range a.rows {
		lp[a.slots[k]] = float64(a.lp[r])
		ent[a.slots[k]] = float64(a.ent[r])
	}
}

// upstream sets each need row's upstream gradients from its slot of dlp
// and dH (nil: none) and zeros the other rows'.
func (a *acts[F]) upstream(dlp, dH []float64) {
	clear(a.dlp)
	clear(a.dH)
	for k, r := range a.rows {
		a.dlp[r] = dlp[a.slots[k]]
		if dH != nil {
			a.dH[r] = dH[a.slots[k]]
		}
	}
}
