package gpu

// Dimensions: B sequences, T padded length, N = B·T rows, D hidden, L layers,
// H query heads, G key/value heads, E = D/H head width, M MLP width, V vocab.

// net is the Llama decoder over one flat weight buffer, generic so that the
// float64 gradient checks run exactly the float32 production code.
type net[F Float] struct {
	cfg      Config
	w        params[F]
	cos, sin []F       // RoPE table: [Context, E/2] each
	workers  int       // goroutines for the row-wise kernels
	mm       linear[F] // the weight products: the CPU's BLAS unless a device was set
}

func newNet[F Float](cfg Config, flat []F, workers int) *net[F] {
	cos, sin := ropeTable[F](cfg.Context, cfg.HeadDim(), cfg.RopeTheta)
	workers = max(workers, 1)
	return &net[F]{cfg: cfg, w: bindParams(cfg, flat), cos: cos, sin: sin, workers: workers, mm: cpuLinear[F]{workers}}
}

func (n *net[F]) attnShape(b, t int) attnShape {
	c := n.cfg
	return attnShape{B: b, T: t, H: c.Heads, G: c.KVHeads, E: c.HeadDim()}
}

// acts is the workspace of one padded (B, T) shape: every activation the
// backward pass needs, plus scratch for the gradients. It is allocated once
// per shape and reused by every step of that shape.
type acts[F Float] struct {
	B, T    int
	tokens  []int32   // [N] input ids (PAD past each sequence's end)
	pos     []int32   // [N] position of each row within its sequence
	targets []int32   // [N] next token of each row (for the log-prob gather)
	need    []bool    // [N] rows whose next-token distribution is read (completion positions)
	resid   [][]F     // L+1 × [N, D]: input of each block; resid[L] is the output
	mid     [][]F     // L × [N, D]: residual after attention
	xn1     [][]F     // L × [N, D]: input_layernorm output
	inv1    [][]F     // L × [N]: its 1/rms
	qkv     [][]F     // L × [N, (H+2G)·E]: projections, q and k rotated
	probs   [][]F     // L × [B, H, T, T]: causal attention probabilities
	att     [][]F     // L × [N, H·E]: attention output before o_proj
	xn2     [][]F     // L × [N, D]: post_attention_layernorm output
	inv2    [][]F     // L × [N]
	gu      [][]F     // L × [N, 2M]: gate and up projections
	act     [][]F     // L × [N, M]: silu(gate)·up
	sig     [][]F     // L × [N, M]: sigmoid(gate)
	xf      []F       // [N, D]: final norm output
	invf    []F       // [N]
	logp    []F       // [N, V]: log_softmax(logits / temperature), on need rows only
	ent     []F       // [N]: entropy of each need row's next-token distribution
	dlp, dH []float64 // [N]: upstream gradients per row (zero where unused)

	// backward scratch, shared by all layers; dlogits ([N, V]) also holds
	// the logits in the forward pass
	dx, dxn, dqkv, datt, dgu, dact, dlogits, dscores []F
}

// newActs allocates the workspace of shape (b, t). With train false it is
// a forward-only (scoring) workspace: every layer shares one set of buffers
// and the residual stream alternates between two, so it takes about 1/L of
// the memory; backward must not be run on it.
func newActs[F Float](c Config, b, t, workers int, train bool) *acts[F] {
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
	a := &acts[F]{B: b, T: t, tokens: make([]int32, n), pos: make([]int32, n), targets: make([]int32, n), need: make([]bool, n),
		mid: mkL(n * d), xn1: mkL(n * d), inv1: mkL(n), qkv: mkL(n * qs),
		probs: mkL(b * c.Heads * t * t), att: mkL(n * he), xn2: mkL(n * d), inv2: mkL(n), gu: mkL(n * 2 * m),
		act: mkL(n * m), sig: mkL(n * m), xf: mk(n * d), invf: mk(n), logp: mk(n * c.Vocab), ent: mk(n),
		dlogits: mk(n * c.Vocab)}
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
	for r := range a.pos {
		a.pos[r] = int32(r % t)
	}
	return a
}

// forward runs the decoder on a.tokens and leaves, for every row marked in
// a.need, the log-probabilities of the next token at temperature temp in
// a.logp and their entropy in a.ent (nanoGPT's forward, every activation
// kept for backward).
func (n *net[F]) forward(a *acts[F], temp float64) {
	c, w, k := n.cfg, n.w, n.workers
	N, D, M, V := a.B*a.T, c.Hidden, c.MLP, c.Vocab
	as := n.attnShape(a.B, a.T)
	qs, he := as.stride(), as.H*as.E
	embed(a.resid[0], w.embed, a.tokens, D)
	for l, lw := range w.layers {
		x := a.resid[l]
		rmsnorm(a.xn1[l], a.inv1[l], x, lw.attnNorm, D, c.NormEps, k)
		n.mm.NT(a.qkv[l], a.xn1[l], lw.qkv, N, D, qs, false)
		rope(a.qkv[l], a.pos, qs, as.H+as.G, as.E, n.cos, n.sin, 1, k)
		attention(a.att[l], a.probs[l], a.qkv[l], as, k)
		copy(a.mid[l], x)
		n.mm.NT(a.mid[l], a.att[l], lw.o, N, he, D, true) // mid = x + o_proj(att)
		rmsnorm(a.xn2[l], a.inv2[l], a.mid[l], lw.mlpNorm, D, c.NormEps, k)
		n.mm.NT(a.gu[l], a.xn2[l], lw.gateUp, N, D, 2*M, false)
		swiglu(a.act[l], a.sig[l], a.gu[l], M, k)
		copy(a.resid[l+1], a.mid[l])
		n.mm.NT(a.resid[l+1], a.act[l], lw.down, N, M, D, true) // x' = mid + down_proj(act)
	}
	rmsnorm(a.xf, a.invf, a.resid[c.Layers], w.norm, D, c.NormEps, k)
	n.mm.NT(a.dlogits, a.xf, w.head, N, D, V, false) // logits: [N, V] (dlogits as scratch)
	logSoftmaxEntropy(a.logp, a.ent, a.dlogits, a.need, V, temp, k)
}

// backward accumulates into g the gradient of a loss whose derivatives wrt
// each row's target log-prob and entropy are a.dlp and a.dH; forward must
// have run on a with the same temperature.
func (n *net[F]) backward(a *acts[F], g params[F], temp float64) {
	c, w, k := n.cfg, n.w, n.workers
	N, D, M, V := a.B*a.T, c.Hidden, c.MLP, c.Vocab
	as := n.attnShape(a.B, a.T)
	qs, he := as.stride(), as.H*as.E
	logSoftmaxEntropyBackward(a.dlogits, a.logp, a.ent, a.targets, a.dlp, a.dH, V, temp, k)
	n.mm.TNAdd(g.head, a.dlogits, a.xf, N, D, V)
	n.mm.NN(a.dxn, a.dlogits, w.head, N, D, V, false)
	clear(a.dx)
	rmsnormBackward(a.dx, g.norm, a.dxn, a.resid[c.Layers], a.invf, w.norm, D, k)
	for l := c.Layers - 1; l >= 0; l-- { // a.dx holds dLoss/d resid[l+1]
		lw, lg := w.layers[l], g.layers[l]
		n.mm.TNAdd(lg.down, a.dx, a.act[l], N, M, D)
		n.mm.NN(a.dact, a.dx, lw.down, N, M, D, false)
		swigluBackward(a.dgu, a.dact, a.gu[l], a.sig[l], M, k)
		n.mm.TNAdd(lg.gateUp, a.dgu, a.xn2[l], N, D, 2*M)
		n.mm.NN(a.dxn, a.dgu, lw.gateUp, N, D, 2*M, false)
		rmsnormBackward(a.dx, lg.mlpNorm, a.dxn, a.mid[l], a.inv2[l], lw.mlpNorm, D, k) // now dLoss/d mid
		n.mm.TNAdd(lg.o, a.dx, a.att[l], N, he, D)
		n.mm.NN(a.datt, a.dx, lw.o, N, he, D, false)
		attentionBackward(a.dqkv, a.datt, a.qkv[l], a.probs[l], a.dscores, as, k)
		rope(a.dqkv, a.pos, qs, as.H+as.G, as.E, n.cos, n.sin, -1, k)
		n.mm.TNAdd(lg.qkv, a.dqkv, a.xn1[l], N, D, qs)
		n.mm.NN(a.dxn, a.dqkv, lw.qkv, N, D, qs, false)
		rmsnormBackward(a.dx, lg.attnNorm, a.dxn, a.resid[l], a.inv1[l], lw.attnNorm, D, k) // dLoss/d resid[l]
	}
	embedBackward(g.embed, a.dx, a.tokens, D)
}
