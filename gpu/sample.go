package gpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
	"github.com/mgrpo/mgrpo/internal/seeds"
)

// SampleOptions controls Sample.
type SampleOptions struct {
	// Temperature divides the logits before the softmax; must be > 0 unless
	// Greedy (then 0 means 1). The reported log-probs use it too.
	Temperature float64
	// TopK, if > 0, draws only among the K most likely tokens and those
	// tied with the K-th (Hugging Face TopKLogitsWarper, vLLM).
	TopK int
	// TopP, if in (0, 1), draws only among the smallest set of most likely
	// tokens whose probability reaches TopP (nucleus sampling), measured
	// after TopK: renormalised over the TopK tokens, as Hugging Face
	// generate applies TopPLogitsWarper after TopKLogitsWarper. 0 or 1 is
	// off.
	TopP float64
	// MaxNewTokens caps each completion; it is further capped so that prompt
	// plus completion fit the context (finish reason "length" either way).
	MaxNewTokens int
	// Seeds fix the draws, one per prompt (more are ignored; none are
	// needed when Greedy): completion j of prompt i draws from its own
	// random stream (Seeds[i], j), so a completion does not depend on the
	// other prompts of the call or their order. PromptSeeds derives them
	// from one seed.
	Seeds []uint64
	// EOS is the stop token (tokenizer.EosID = 2); ≤ 0 means none, since 0
	// is PAD. A drawn EOS is kept as the completion's last token.
	EOS int
	// Greedy takes the most likely token (lowest id on ties) instead of
	// drawing.
	Greedy bool
}

// PromptSeeds returns n per-prompt seeds derived from seed,
// for callers whose prompts have no seeds of their own.
func PromptSeeds(seed uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = seeds.Of(seed, uint64(i))
	}
	return out
}

// FinishReason says why a completion ended.
type FinishReason string

// Finish reasons, as in OpenAI/vLLM outputs.
const (
	FinishStop   FinishReason = "stop"   // EOS was drawn
	FinishLength FinishReason = "length" // MaxNewTokens or the context was reached
)

// Sample is one completion.
type Sample struct {
	// Prompt is the index of the prompt it continues.
	Prompt int
	// Tokens are the drawn ids, including a final EOS when Finish is stop.
	Tokens []int
	// LogProbs are the behaviour log-probs of Tokens: log_softmax(logits /
	// Temperature) over the FULL vocabulary, as TRL's scorer computes them.
	// TopK/TopP only restrict which tokens can be drawn; they do not
	// renormalise these values.
	LogProbs []float64
	// Entropies are the exact entropies, in nats, of the distribution each
	// token was drawn from (log_softmax(logits / Temperature), full
	// vocabulary, as LogProbs).
	Entropies []float64
	// Finish is stop or length.
	Finish FinishReason
}

// Sample draws n completions for each prompt, group-major (all of prompt
// 0's, then prompt 1's, ...), decoding all sequences together with a
// key/value cache: one matrix product per weight matrix per step for the
// whole batch. Same model, inputs and options give the same samples.
func (m *Model) Sample(prompts [][]int, n int, opt SampleOptions) ([]Sample, error) {
	opt, err := checkSample(m.cfg, prompts, n, opt)
	if err != nil {
		return nil, err
	}
	return m.eng.Sample(prompts, n, opt)
}

// checkSample validates Sample's arguments and returns the options the
// engine runs: Temperature 1 when Greedy leaves it 0.
func checkSample(c Config, prompts [][]int, n int, opt SampleOptions) (SampleOptions, error) {
	if err := checkSampleArgs(c, prompts, n, opt); err != nil {
		return opt, fmt.Errorf("sample: %w", err)
	}
	if opt.Temperature == 0 {
		opt.Temperature = 1
	}
	return opt, nil
}

func checkSampleArgs(c Config, prompts [][]int, n int, opt SampleOptions) error {
	switch {
	case n < 1:
		return fmt.Errorf("%w: n = %d completions per prompt, want ≥ 1", ErrBadInput, n)
	case !opt.Greedy && !(opt.Temperature > 0), opt.Temperature < 0:
		return fmt.Errorf("%w: temperature %g must be > 0", ErrBadInput, opt.Temperature)
	case opt.TopK < 0, !(opt.TopP >= 0 && opt.TopP <= 1):
		return fmt.Errorf("%w: top_k %d must be ≥ 0 and top_p %g in [0, 1]", ErrBadInput, opt.TopK, opt.TopP)
	case opt.MaxNewTokens < 1:
		return fmt.Errorf("%w: max_new_tokens %d must be ≥ 1", ErrBadInput, opt.MaxNewTokens)
	case !opt.Greedy && len(opt.Seeds) < len(prompts):
		return fmt.Errorf("%w: %d seeds for %d prompts", ErrBadInput, len(opt.Seeds), len(prompts))
	}
	for i, p := range prompts {
		if len(p) >= c.Context {
			return fmt.Errorf("%w: prompt %d: %d tokens leave no room in the context of %d", ErrBadInput, i, len(p), c.Context)
		}
	}
	seqs := make([]Sequence, len(prompts))
	for i, p := range prompts {
		seqs[i].Prompt = p
	}
	return checkSequences(c, seqs)
}

// sampleNet is Sample for either precision (the tests run it in float64).
// The sequences are split into n.workers contiguous groups, each decoded
// by one goroutine with its own decoder and single-threaded kernels: the
// groups never wait for each other, where splitting each product and
// kernel of a decode step over the cores cost a hand-off per kernel, with
// little work between them. Decoders come from pool (nil: allocate) and go
// back to it.
func sampleNet[F Float](n *net[F], pool *decoderPool[F], prompts [][]int, num int, opt SampleOptions) ([]Sample, error) {
	opt, err := checkSample(n.cfg, prompts, num, opt)
	if err != nil {
		return nil, err
	}
	return sampleChecked(n, pool, prompts, num, opt)
}

// sampleChecked is sampleNet on arguments checkSample has passed.
func sampleChecked[F Float](n *net[F], pool *decoderPool[F], prompts [][]int, num int, opt SampleOptions) ([]Sample, error) {
	S := len(prompts) * num
	out := make([]Sample, S)
	groups := make([]sampleGroup, min(n.workers, S))
	for g := range groups {
		groups[g] = newSampleGroup(n.cfg, prompts, num, g*S/len(groups), (g+1)*S/len(groups), opt)
	}
	ds, err := pool.get(n, groups, opt.MaxNewTokens)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	defer pool.put(ds)
	if n.pk == nil { // the products need the weights transposed
		wt, err := pool.transposed(n)
		if err != nil {
			return nil, fmt.Errorf("sample: %w", err)
		}
		for _, d := range ds {
			d.wt = wt
		}
	}
	parallelFor(len(groups), len(groups), func(g, _, _ int) { ds[g].sample(out, prompts, num, groups[g], opt) })
	return out, nil
}

// sampleGroup is the sequences lo..hi-1 of a Sample call (sequence s
// continues prompt s/num) and the decoder shape they need.
type sampleGroup struct {
	lo, hi     int
	tmax, rows int // positions per sequence, rows of the largest step (the prefill)
}

func newSampleGroup(c Config, prompts [][]int, num, lo, hi int, opt SampleOptions) sampleGroup {
	g := sampleGroup{lo: lo, hi: hi, tmax: 1}
	for s := lo; s < hi; s++ {
		p := prompts[s/num]
		g.tmax = max(g.tmax, len(p)+min(opt.MaxNewTokens, c.Context-len(p)))
		if s == lo || s%num == 0 {
			g.rows += len(p)
		}
	}
	g.rows = max(g.rows, hi-lo)
	return g
}

// sample draws the group's completions into out, slot i of the decoder
// holding sequence g.lo+i.
func (d *decoder[F]) sample(out []Sample, prompts [][]int, num int, g sampleGroup, opt SampleOptions) {
	V := d.n.cfg.Vocab
	limit := make([]int, g.hi-g.lo)
	rngs := make([]rand.PCG, g.hi-g.lo) // one stream per sequence, in one allocation
	total := 0
	for s := g.lo; s < g.hi; s++ {
		limit[s-g.lo] = min(opt.MaxNewTokens, d.n.cfg.Context-len(prompts[s/num]))
		if !opt.Greedy {
			rngs[s-g.lo].Seed(opt.Seeds[s/num], uint64(s%num))
		}
		total += limit[s-g.lo]
	}
	// the outputs of all the group's sequences, carved up front: the decode
	// loop appends without allocating
	toks, lps, ents := make([]int, total), make([]float64, total), make([]float64, total)
	for s, at := g.lo, 0; s < g.hi; s++ {
		n := limit[s-g.lo]
		out[s] = Sample{Prompt: s / num, Tokens: toks[at : at : at+n], LogProbs: lps[at : at : at+n], Entropies: ents[at : at : at+n]}
		at += n
	}
	rowOf := d.prefill(prompts, num, g) // logits row of each slot's next token
	dr := newDrawer(V, opt)
	for active := g.hi - g.lo; active > 0; {
		r := 0
		for i, row := range rowOf {
			if row < 0 {
				continue
			}
			smp := &out[g.lo+i]
			tok, lp, h := drawToken(dr, d.logits[row*V:(row+1)*V], &rngs[i])
			smp.Tokens, smp.LogProbs, smp.Entropies = append(smp.Tokens, tok), append(smp.LogProbs, lp), append(smp.Entropies, h)
			switch {
			case opt.EOS > 0 && tok == opt.EOS:
				smp.Finish = FinishStop
			case len(smp.Tokens) == limit[i]:
				smp.Finish = FinishLength
			default:
				d.tok[r], d.pos[r], d.slot[r] = int32(tok), int32(len(prompts[smp.Prompt])+len(smp.Tokens)-1), int32(i)
				rowOf[i] = r
				r++
				continue
			}
			rowOf[i] = -1
			active--
		}
		if r > 0 {
			d.run(r, nil)
		}
	}
}

// decoderPool keeps idle decoders (up to one per worker, the largest seen)
// so that repeated Sample calls of similar shape reuse their key/value
// caches, and the model's transposed weights.
type decoderPool[F Float] struct {
	mu    sync.Mutex
	spare []*decoder[F]
	wt    *transposed[F]
}

// transposed holds a net's weight matrices transposed to [in, out]: a
// decode step's products, on a few dozen rows, run about 5% faster as
// x·Wᵀ with Wᵀ stored (BLAS "NN") than with W (BLAS "NT").
type transposed[F Float] struct {
	layers []layerParams[F] // qkv, o, gateUp, down: [in, out]
	head   []F              // [D, V]
}

// transposed returns the weights of n transposed, made on the first call
// if they fit in memory (the pool belongs to one immutable Model); a nil
// pool makes them anew.
func (p *decoderPool[F]) transposed(n *net[F]) (*transposed[F], error) {
	if p == nil {
		return transposeWeights(n), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wt == nil {
		if err := CheckMemory("the sampler's transposed weights", n.cfg.WeightBytes()); err != nil {
			return nil, err
		}
		p.wt = transposeWeights(n)
	}
	return p.wt, nil
}

func transposeWeights[F Float](n *net[F]) *transposed[F] {
	c := n.cfg
	E := c.HeadDim()
	qs, he := (c.Heads+2*c.KVHeads)*E, c.Heads*E
	t := &transposed[F]{head: transpose(n.w.head, c.Vocab, c.Hidden, n.workers)}
	for _, lw := range n.w.layers {
		t.layers = append(t.layers, layerParams[F]{qkv: transpose(lw.qkv, qs, c.Hidden, n.workers), o: transpose(lw.o, c.Hidden, he, n.workers),
			gateUp: transpose(lw.gateUp, 2*c.MLP, c.Hidden, n.workers), down: transpose(lw.down, c.Hidden, c.MLP, n.workers)})
	}
	return t
}

// transposeTile is the side of the square tiles transpose moves at a
// time. Within a tile it writes each row of the transpose whole and reads
// a column of w: the tile's 64 rows of w stay in the first-level cache,
// where element by element over the whole matrix every write to a wide
// transpose's column missed it (a model of 135 M weights took 2.5 s that
// way on every new policy version; BenchmarkTranspose).
const transposeTile = 64

// transpose returns the [cols, rows] transpose of the row-major [rows,
// cols] w, tile by tile, bands of transposeTile rows of w spread over
// workers.
func transpose[F Float](w []F, rows, cols, workers int) []F {
	t := make([]F, rows*cols)
	bands := (rows + transposeTile - 1) / transposeTile
	parallelFor(bands, workers, func(_, lo, hi int) {
		for r0 := lo * transposeTile; r0 < min(hi*transposeTile, rows); r0 += transposeTile {
			r1 := min(r0+transposeTile, rows)
			for c0 := 0; c0 < cols; c0 += transposeTile {
				for c := c0; c < min(c0+transposeTile, cols); c++ {
					row := t[c*rows+r0 : c*rows+r1] // row c of the transpose, columns r0..r1-1
					for i := range row {
						row[i] = w[(r0+i)*cols+c]
					}
				}
			}
		}
	})
	return t
}

// get returns one decoder per group, each with room for its sequences,
// positions and rows. A reused one needs no clearing: every cache entry a
// row reads is written earlier in the same Sample call. New ones, with the
// outputs of up to newTokens tokens per sequence, must fit together in the
// memory available.
func (p *decoderPool[F]) get(n *net[F], groups []sampleGroup, newTokens int) ([]*decoder[F], error) {
	ds := make([]*decoder[F], len(groups))
	if p != nil {
		p.mu.Lock()
		for i, g := range groups {
			for j, d := range p.spare {
				if d.slots >= g.hi-g.lo && d.tmax >= g.tmax && len(d.tok) >= g.rows {
					ds[i] = d
					p.spare = append(p.spare[:j], p.spare[j+1:]...)
					break
				}
			}
		}
		p.mu.Unlock()
	}
	var need float64
	slots, tmax := 0, 0
	for i, g := range groups {
		if ds[i] == nil {
			need += sampleBytes(n.cfg, float64(g.hi-g.lo), float64(g.tmax), float64(g.rows), float64(newTokens), 1)
			slots, tmax = slots+g.hi-g.lo, max(tmax, g.tmax)
		}
	}
	if slots > 0 {
		if err := CheckMemory(fmt.Sprintf("sampling %d sequences of up to %d tokens", slots, tmax), toBytes(need)); err != nil {
			p.put(ds)
			return nil, err
		}
	}
	for i, g := range groups {
		if ds[i] == nil {
			ds[i] = newDecoder(n, g.hi-g.lo, g.tmax, g.rows)
		}
	}
	return ds, nil
}

// put returns decoders to the pool, which keeps the n.workers largest.
func (p *decoderPool[F]) put(ds []*decoder[F]) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		if d != nil {
			p.spare = append(p.spare, d)
		}
	}
	size := func(d *decoder[F]) int { return d.slots*d.tmax + len(d.tok) }
	slices.SortFunc(p.spare, func(a, b *decoder[F]) int { return cmp.Compare(size(b), size(a)) })
	if len(p.spare) > 0 {
		keep := max(p.spare[0].n.workers, 1)
		clear(p.spare[min(keep, len(p.spare)):])
		p.spare = p.spare[:min(keep, len(p.spare))]
	}
}

// decoder holds the key/value cache and the activations of the rows (one
// token of one sequence each) decoded in one step. It runs on one
// goroutine: its products and kernels are single-threaded.
type decoder[F Float] struct {
	n      *net[F]
	mm     linear[F]
	wt     *transposed[F] // n's weights, transposed (set for each Sample)
	slots  int            // sequences the cache has room for
	tmax   int            // positions per sequence in the cache
	kc, vc [][]F          // L × [S, G, tmax, E]: rotated keys and values by slot, head and position
	tok    []int32
	pos    []int32
	slot   []int32
	x, xn  []F // [R, D]
	inv    []F // [R]
	qkv    []F // [R, (H+2G)·E]
	qkInv  []F // [R, H+G]: 1/rms of Qwen3's q/k heads, else nil
	att    []F // [R, H·E]
	gu     []F // [R, 2M]
	act    []F // [R, M]
	sig    []F // [R, M]
	logits []F // [S, V]: a step reads at most one row per sequence
	scores []F // tmax
}

func newDecoder[F Float](n *net[F], slots, tmax, rows int) *decoder[F] {
	c := n.cfg
	ge, qs := c.KVHeads*c.HeadDim(), (c.Heads+2*c.KVHeads)*c.HeadDim()
	d := &decoder[F]{n: n, mm: cpuLinear[F]{workers: 1, pk: n.pk}, slots: slots, tmax: tmax, tok: make([]int32, rows), pos: make([]int32, rows), slot: make([]int32, rows),
		x: make([]F, rows*c.Hidden), xn: make([]F, rows*c.Hidden), inv: make([]F, rows), qkv: make([]F, rows*qs),
		att: make([]F, rows*c.Heads*c.HeadDim()), gu: make([]F, rows*2*c.MLP), act: make([]F, rows*c.MLP), sig: make([]F, rows*c.MLP),
		logits: make([]F, slots*c.Vocab), scores: make([]F, tmax)}
	if c.QKNorm() {
		d.qkInv = make([]F, rows*(c.Heads+c.KVHeads))
	}
	for l := 0; l < c.Layers; l++ {
		d.kc = append(d.kc, make([]F, slots*tmax*ge))
		d.vc = append(d.vc, make([]F, slots*tmax*ge))
	}
	return d
}

// prefill runs the group's prompts once each (into the cache slot of the
// prompt's first sample in the group), copies their cache to the prompt's
// other samples, and returns for each slot the logits row of its first new
// token.
func (d *decoder[F]) prefill(prompts [][]int, num int, g sampleGroup) []int {
	rowOf := make([]int, g.hi-g.lo)
	var outs []int32 // the prompts' last rows: only their logits are read
	r := 0
	for first := g.lo; first < g.hi; {
		i := first / num
		last := min(g.hi, (i+1)*num)
		for t, id := range prompts[i] {
			d.tok[r], d.pos[r], d.slot[r] = int32(id), int32(t), int32(first-g.lo)
			r++
		}
		for s := first; s < last; s++ {
			rowOf[s-g.lo] = len(outs)
		}
		outs = append(outs, int32(r-1))
		first = last
	}
	d.run(r, outs)
	G, E := d.n.cfg.KVHeads, d.n.cfg.HeadDim()
	for first := g.lo; first < g.hi; {
		i := first / num
		last := min(g.hi, (i+1)*num)
		for l := range d.kc {
			for _, c := range [][]F{d.kc[l], d.vc[l]} {
				for h := 0; h < G; h++ {
					src := c[((first-g.lo)*G+h)*d.tmax*E:][:len(prompts[i])*E]
					for s := first + 1; s < last; s++ {
						copy(c[((s-g.lo)*G+h)*d.tmax*E:], src)
					}
				}
			}
		}
		first = last
	}
	return rowOf
}

// run decodes rows 0..r-1 (token tok at position pos of cache slot slot),
// writing their keys and values into the cache, and the next-token logits
// of rows outs (ascending; nil: every row) into d.logits, row i for
// outs[i]. Rows of one slot may come in order in one call (prefill): all
// keys are cached before any row attends. The last block after its keys
// and values, the final norm and lm_head run on rows outs only.
func (d *decoder[F]) run(r int, outs []int32) {
	n, c := d.n, d.n.cfg
	D, M, V, he := c.Hidden, c.MLP, c.Vocab, c.Heads*c.HeadDim()
	x, xn, inv := d.x[:r*D], d.xn[:r*D], d.inv[:r]
	embed(x, n.w.embed, d.tok[:r], D)
	for l, lw := range n.w.layers {
		var wt layerParams[F] // the transposed weights, without packed ones
		if n.pk == nil {
			wt = d.wt.layers[l]
		}
		rmsnorm(xn, inv, x, lw.attnNorm, D, c.NormEps, 1)
		d.project(l, r, lw, wt)
		R, rows := r, []int32(nil) // the rows from here on: all, or the last block's outs
		if l == c.Layers-1 && outs != nil {
			R, rows = len(outs), outs
			gatherRowsInPlace(x, outs, D)
		}
		d.attend(l, r, rows)
		xr, xnr, invr := x[:R*D], xn[:R*D], inv[:R]
		d.mul(xr, d.att[:R*he], lw.o, wt.o, R, he, D, true)
		rmsnorm(xnr, invr, xr, lw.mlpNorm, D, c.NormEps, 1)
		d.mul(d.gu[:R*2*M], xnr, lw.gateUp, wt.gateUp, R, D, 2*M, false)
		swiglu(d.act[:R*M], d.sig[:R*M], d.gu[:R*2*M], M, 1)
		d.mul(xr, d.act[:R*M], lw.down, wt.down, R, M, D, true)
		x, xn, inv = xr, xnr, invr
	}
	R := len(x) / D
	rmsnorm(xn, inv, x, n.w.norm, D, c.NormEps, 1)
	var head []F
	if n.pk == nil {
		head = d.wt.head
	}
	d.mul(d.logits[:R*V], xn, n.w.head, head, R, D, V, false)
}

// project computes layer l's queries, keys and values of rows 0..r-1
// from d.xn (lw the layer's weights, wt their transposes): the q/k/v
// product plus Qwen2's bias, Qwen3's q/k norms, RoPE; then caches the keys
// and values.
func (d *decoder[F]) project(l, r int, lw, wt layerParams[F]) {
	n, c := d.n, d.n.cfg
	s := headShape{c.Heads, c.KVHeads, c.HeadDim()}
	qs := s.stride()
	qkv, bias := d.qkv[:r*qs], lw.qkvBias != nil
	if bias { // the rows start as the bias; the product adds to them
		broadcastRows(qkv, lw.qkvBias)
	}
	d.mul(qkv, d.xn[:r*c.Hidden], lw.qkv, wt.qkv, r, c.Hidden, qs, bias)
	if lw.qNorm != nil {
		qkNorm(qkv, nil, d.qkInv, lw.qNorm, lw.kNorm, s, r, c.NormEps, 1)
	}
	rope(qkv, d.pos[:r], qs, s.H+s.G, s.E, n.cos, n.sin, 1, 1)
	d.cacheKV(l, r)
}

// mul computes dst = x·wᵀ (+ dst when accumulate) for the r rows of x, w
// [out, in]: through the net's packed weights when it has them, else as
// x·wt with wt = wᵀ stored (see transposed).
func (d *decoder[F]) mul(dst, x, w, wt []F, r, in, out int, accumulate bool) {
	if d.n.pk != nil {
		d.mm.NT(dst, x, w, r, in, out, accumulate)
		return
	}
	d.mm.NN(dst, x, wt, r, out, in, accumulate)
}

// gatherRowsInPlace moves rows rows (ascending) of x ([*, d]) to the front,
// row rows[i] to row i ≤ rows[i].
func gatherRowsInPlace[F Float](x []F, rows []int32, d int) {
	for i, r := range rows {
		copy(x[i*d:(i+1)*d], x[int(r)*d:(int(r)+1)*d])
	}
}

// cacheKV copies the rotated keys and the values of rows 0..r-1 into layer
// l's cache.
func (d *decoder[F]) cacheKV(l, r int) {
	c := d.n.cfg
	E, G := c.HeadDim(), c.KVHeads
	qs := (c.Heads + 2*G) * E
	for i := 0; i < r; i++ {
		row := d.qkv[i*qs:]
		for g := 0; g < G; g++ {
			at := ((int(d.slot[i])*G+g)*d.tmax + int(d.pos[i])) * E
			copy(d.kc[l][at:at+E], row[(c.Heads+g)*E:])
			copy(d.vc[l][at:at+E], row[(c.Heads+G+g)*E:])
		}
	}
}

// attend computes causal attention of the queries of rows 0..r-1, or of
// rows outs when not nil, over their slots' cached keys and values at
// positions 0..pos (each head's contiguous: the cache streams through the
// prefetchers), writing the k-th row's output to row k of d.att.
func (d *decoder[F]) attend(l, r int, outs []int32) {
	c := d.n.cfg
	E, G := c.HeadDim(), c.KVHeads
	qs, he := (c.Heads+2*G)*E, c.Heads*E
	scale := F(1 / math.Sqrt(float64(E)))
	if outs != nil {
		r = len(outs)
	}
	for k := 0; k < r; k++ {
		i := k
		if outs != nil {
			i = int(outs[k])
		}
		n := int(d.pos[i]) + 1
		for h := 0; h < c.Heads; h++ {
			base := (int(d.slot[i])*G + h/(c.Heads/G)) * d.tmax * E
			attendHead(d.att[k*he+h*E:k*he+(h+1)*E], d.qkv[i*qs+h*E:i*qs+(h+1)*E],
				d.kc[l][base:], d.vc[l][base:], d.scores[:n], E, scale)
		}
	}
}

// attendHead writes o = softmax(q·kᵀ·scale)·v for one query over the
// len(sc) cached positions, key s at k[s·stride:], value s at v[s·stride:].
func attendHead[F Float](o, q, k, v, sc []F, stride int, scale F) {
	if is32[F]() {
		sc32 := as32(sc)
		vec.Scores(sc32, as32(q), as32(k), stride, float32(scale))
		vec.Scale(sc32, float32(1/vec.ExpShift(sc32, sc32, vec.Max(sc32), 1)))
		vec.Mix(as32(o), sc32, as32(v), stride)
		return
	}
	e := len(q)
	for s := range sc {
		ks := k[s*stride : s*stride+e]
		var a F
		for j, x := range q {
			a += x * ks[j]
		}
		sc[s] = a * scale
	}
	inv := F(1 / expShiftRow(sc, sc, rowMax(sc), 1))
	clear(o)
	for s, p := range sc {
		p *= inv
		vs := v[s*stride : s*stride+e]
		for j := range o {
			o[j] += p * vs[j]
		}
	}
}

// drawer turns one logits row into a token and its log-prob.
type drawer struct {
	opt  SampleOptions
	lp   []float64 // [V] log_softmax(z / T)
	p    []float64 // [V] softmax(z / T)
	e    []float32 // [V] softmax32's exponentials
	cand []int     // candidate ids, most likely first
	keys []candKey // sortCand's ids with their log-probs
}

func newDrawer(v int, opt SampleOptions) *drawer {
	return &drawer{opt: opt, lp: make([]float64, v), p: make([]float64, v), e: make([]float32, v), cand: make([]int, v)}
}

// drawToken returns the drawn (or greedy) token of logits row z, its
// log-prob under log_softmax(z / T) over the full vocabulary, and the exact
// entropy of that distribution. The draw is among dr.candidates(), in
// proportion to their probabilities (renormalised over the candidates).
func drawToken[F Float](dr *drawer, z []F, rng *rand.PCG) (tok int, lp, entropy float64) {
	best, entropy := softmax(dr, z)
	if dr.opt.Greedy {
		return best, dr.lp[best], entropy
	}
	cand := dr.candidates()
	var total float64
	for _, id := range cand {
		total += dr.p[id]
	}
	u := float64(rng.Uint64()<<11>>11) / (1 << 53) * total // rand.Rand's Float64 of the stream
	tok = cand[0]
	for _, id := range cand {
		if dr.p[id] == 0 {
			continue // never drawn, even if rounding leaves u ≥ 0 at the end
		}
		tok = id
		if u -= dr.p[id]; u < 0 {
			break
		}
	}
	return tok, dr.lp[tok], entropy
}

// softmax fills dr.lp with log_softmax(z / T) and dr.p with softmax(z / T),
// and returns the most likely token (lowest id on ties) and the entropy.
func softmax[F Float](dr *drawer, z []F) (best int, entropy float64) {
	inv := 1 / dr.opt.Temperature
	mx := math.Inf(-1)
	for i, v := range z {
		if float64(v) > mx {
			mx, best = float64(v), i
		}
	}
	if is32[F]() {
		return best, softmax32(dr, as32(z), mx, inv)
	}
	var sum float64
	for i, v := range z {
		dr.lp[i] = (float64(v) - mx) * inv
		dr.p[i] = math.Exp(dr.lp[i])
		sum += dr.p[i]
	}
	lse := math.Log(sum)
	for i := range dr.lp {
		dr.lp[i] -= lse
		dr.p[i] /= sum
		entropy -= dr.p[i] * dr.lp[i]
	}
	return best, entropy
}

// softmax32 is softmax of a float32 row whose largest logit is mx: the
// exponentials in float32 with the learner's kernel (vec.ExpShift, as the
// training tail's log-softmax), summed in float64; the log-probs in
// float64 from the logits and that sum, as the float64 path has them; and
// the probabilities each exponential over the sum. It returns the entropy.
func softmax32(dr *drawer, z []float32, mx, inv float64) (entropy float64) {
	e := dr.e[:len(z)]
	sum := vec.ExpShift(e, z, float32(mx), float32(inv))
	lse := math.Log(sum)
	for i, v := range z {
		lp, p := (float64(v)-mx)*inv-lse, float64(e[i])/sum
		dr.lp[i], dr.p[i] = lp, p
		entropy -= p * lp
	}
	return entropy
}
