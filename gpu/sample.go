package gpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
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
	// Seed fixes the draws: completion j of prompt i uses its own random
	// stream seeded with (Seed, i·n+j).
	Seed uint64
	// EOS is the stop token (tokenizer.EosID = 2); ≤ 0 means none, since 0
	// is PAD. A drawn EOS is kept as the completion's last token.
	EOS int
	// Greedy takes the most likely token (lowest id on ties) instead of
	// drawing.
	Greedy bool
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
	return sampleNet(m.net, &m.decoders, prompts, n, opt)
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
// Decoders come from pool (nil: allocate) and go back to it.
func sampleNet[F Float](n *net[F], pool *decoderPool[F], prompts [][]int, num int, opt SampleOptions) ([]Sample, error) {
	if err := checkSampleArgs(n.cfg, prompts, num, opt); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	if opt.Temperature == 0 {
		opt.Temperature = 1
	}
	S, V := len(prompts)*num, n.cfg.Vocab
	out := make([]Sample, S)
	limit := make([]int, S)
	rngs := make([]*rand.Rand, S)
	promptRows, tmax := 0, 1
	for s := range out {
		p := prompts[s/num]
		out[s].Prompt = s / num
		limit[s] = min(opt.MaxNewTokens, n.cfg.Context-len(p))
		rngs[s] = rand.New(rand.NewPCG(opt.Seed, uint64(s)))
		tmax = max(tmax, len(p)+limit[s])
		if s%num == 0 {
			promptRows += len(p)
		}
	}
	d, err := pool.get(n, S, tmax, max(promptRows, S), opt.MaxNewTokens)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	defer pool.put(d)
	rowOf := d.prefill(prompts, num) // logits row of each sequence's next token
	drawers := make([]*drawer, n.workers)
	for i := range drawers {
		drawers[i] = newDrawer(V, opt)
	}
	for active := S; active > 0; {
		// Draw the next token of every active sequence, in parallel: each
		// sequence has its own random stream, so the split does not matter.
		parallelFor(S, n.workers, func(chunk, lo, hi int) {
			for s := lo; s < hi; s++ {
				if rowOf[s] >= 0 {
					smp := &out[s]
					tok, lp, h := drawToken(drawers[chunk], d.logits[rowOf[s]*V:(rowOf[s]+1)*V], rngs[s])
					smp.Tokens, smp.LogProbs, smp.Entropies = append(smp.Tokens, tok), append(smp.LogProbs, lp), append(smp.Entropies, h)
				}
			}
		})
		r := 0
		for s := range out {
			if rowOf[s] < 0 {
				continue
			}
			smp := &out[s]
			tok := smp.Tokens[len(smp.Tokens)-1]
			switch {
			case opt.EOS > 0 && tok == opt.EOS:
				smp.Finish = FinishStop
			case len(smp.Tokens) == limit[s]:
				smp.Finish = FinishLength
			default:
				d.tok[r], d.pos[r], d.slot[r] = int32(tok), int32(len(prompts[s/num])+len(smp.Tokens)-1), int32(s)
				rowOf[s] = r
				r++
				continue
			}
			rowOf[s] = -1
			active--
		}
		if r > 0 {
			d.run(r)
		}
	}
	return out, nil
}

// decoderPool keeps one idle decoder (the largest seen) so that repeated
// Sample calls of similar shape reuse their key/value cache.
type decoderPool[F Float] struct {
	mu    sync.Mutex
	spare *decoder[F]
}

// get returns a decoder with room for slots sequences of tmax positions and
// rows rows per step. A reused one needs no clearing: every cache entry a
// row reads is written earlier in the same Sample call. A new one, with the
// outputs of up to newTokens tokens per sequence, must fit in the memory
// available.
func (p *decoderPool[F]) get(n *net[F], slots, tmax, rows, newTokens int) (*decoder[F], error) {
	if p != nil {
		p.mu.Lock()
		d := p.spare
		if d != nil && d.slots >= slots && d.tmax >= tmax && len(d.tok) >= rows {
			p.spare = nil
			p.mu.Unlock()
			return d, nil
		}
		p.mu.Unlock()
	}
	need := toBytes(sampleBytes(n.cfg, float64(slots), float64(tmax), float64(rows), float64(newTokens), n.workers))
	if err := CheckMemory(fmt.Sprintf("sampling %d sequences of up to %d tokens", slots, tmax), need); err != nil {
		return nil, err
	}
	return newDecoder(n, slots, tmax, rows), nil
}

func (p *decoderPool[F]) put(d *decoder[F]) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spare == nil || d.slots*d.tmax+len(d.tok) >= p.spare.slots*p.spare.tmax+len(p.spare.tok) {
		p.spare = d
	}
}

// decoder holds the key/value cache and the activations of the rows (one
// token of one sequence each) decoded in one step.
type decoder[F Float] struct {
	n      *net[F]
	slots  int   // sequences the cache has room for
	tmax   int   // positions per sequence in the cache
	kc, vc [][]F // L × [S, tmax, G·E]: rotated keys and values by slot and position
	tok    []int32
	pos    []int32
	slot   []int32
	x, xn  []F // [R, D]
	inv    []F // [R]
	qkv    []F // [R, (H+2G)·E]
	att    []F // [R, H·E]
	gu     []F // [R, 2M]
	act    []F // [R, M]
	sig    []F // [R, M]
	logits []F // [R, V]
	scores []F // workers × tmax
}

func newDecoder[F Float](n *net[F], slots, tmax, rows int) *decoder[F] {
	c := n.cfg
	ge, qs := c.KVHeads*c.HeadDim(), (c.Heads+2*c.KVHeads)*c.HeadDim()
	d := &decoder[F]{n: n, slots: slots, tmax: tmax, tok: make([]int32, rows), pos: make([]int32, rows), slot: make([]int32, rows),
		x: make([]F, rows*c.Hidden), xn: make([]F, rows*c.Hidden), inv: make([]F, rows), qkv: make([]F, rows*qs),
		att: make([]F, rows*c.Heads*c.HeadDim()), gu: make([]F, rows*2*c.MLP), act: make([]F, rows*c.MLP), sig: make([]F, rows*c.MLP),
		logits: make([]F, rows*c.Vocab), scores: make([]F, n.workers*tmax)}
	for l := 0; l < c.Layers; l++ {
		d.kc = append(d.kc, make([]F, slots*tmax*ge))
		d.vc = append(d.vc, make([]F, slots*tmax*ge))
	}
	return d
}

// prefill runs every prompt once (into the cache slot of its first sample),
// copies its cache to the prompt's other samples, and returns for each
// sequence the logits row of its first new token.
func (d *decoder[F]) prefill(prompts [][]int, num int) []int {
	rowOf := make([]int, len(prompts)*num)
	r := 0
	for i, p := range prompts {
		for t, id := range p {
			d.tok[r], d.pos[r], d.slot[r] = int32(id), int32(t), int32(i*num)
			r++
		}
		for j := 0; j < num; j++ {
			rowOf[i*num+j] = r - 1
		}
	}
	d.run(r)
	ge := d.n.cfg.KVHeads * d.n.cfg.HeadDim()
	for i, p := range prompts {
		for l := range d.kc {
			for _, c := range [][]F{d.kc[l], d.vc[l]} {
				src := c[i*num*d.tmax*ge : (i*num*d.tmax+len(p))*ge]
				for j := 1; j < num; j++ {
					copy(c[(i*num+j)*d.tmax*ge:], src)
				}
			}
		}
	}
	return rowOf
}

// run decodes rows 0..r-1 (token tok at position pos of cache slot slot),
// writing their keys and values into the cache and their next-token logits
// into d.logits. Rows of one slot may come in order in one call (prefill):
// all keys are cached before any row attends.
func (d *decoder[F]) run(r int) {
	n, c, k := d.n, d.n.cfg, d.n.workers
	D, M, V, E := c.Hidden, c.MLP, c.Vocab, c.HeadDim()
	qs, he := (c.Heads+2*c.KVHeads)*E, c.Heads*E
	x, xn, inv, qkv, att := d.x[:r*D], d.xn[:r*D], d.inv[:r], d.qkv[:r*qs], d.att[:r*he]
	gu, act, pos := d.gu[:r*2*M], d.act[:r*M], d.pos[:r]
	embed(x, n.w.embed, d.tok[:r], D)
	for l, lw := range n.w.layers {
		rmsnorm(xn, inv, x, lw.attnNorm, D, c.NormEps, k)
		n.mm.NT(qkv, xn, lw.qkv, r, D, qs, false)
		rope(qkv, pos, qs, c.Heads+c.KVHeads, E, n.cos, n.sin, 1, k)
		d.cacheKV(l, r)
		d.attend(l, r)
		n.mm.NT(x, att, lw.o, r, he, D, true)
		rmsnorm(xn, inv, x, lw.mlpNorm, D, c.NormEps, k)
		n.mm.NT(gu, xn, lw.gateUp, r, D, 2*M, false)
		swiglu(act, d.sig[:r*M], gu, M, k)
		n.mm.NT(x, act, lw.down, r, M, D, true)
	}
	rmsnorm(xn, inv, x, n.w.norm, D, c.NormEps, k)
	n.mm.NT(d.logits[:r*V], xn, n.w.head, r, D, V, false)
}

// cacheKV copies the rotated keys and the values of rows 0..r-1 into layer
// l's cache.
func (d *decoder[F]) cacheKV(l, r int) {
	c := d.n.cfg
	E := c.HeadDim()
	ge, qs := c.KVHeads*E, (c.Heads+2*c.KVHeads)*E
	for i := 0; i < r; i++ {
		at := (int(d.slot[i])*d.tmax + int(d.pos[i])) * ge
		row := d.qkv[i*qs:]
		copy(d.kc[l][at:at+ge], row[c.Heads*E:])
		copy(d.vc[l][at:at+ge], row[(c.Heads+c.KVHeads)*E:])
	}
}

// attend computes causal attention of each row's queries over its slot's
// cached keys and values at positions 0..pos.
func (d *decoder[F]) attend(l, r int) {
	c := d.n.cfg
	E, G := c.HeadDim(), c.KVHeads
	ge, qs, he := G*E, (c.Heads+2*G)*E, c.Heads*E
	scale := F(1 / math.Sqrt(float64(E)))
	parallelFor(r, d.n.workers, func(chunk, lo, hi int) {
		sc := d.scores[chunk*d.tmax : (chunk+1)*d.tmax]
		for i := lo; i < hi; i++ {
			base, n := int(d.slot[i])*d.tmax*ge, int(d.pos[i])+1
			for h := 0; h < c.Heads; h++ {
				g := h / (c.Heads / G)
				attendHead(d.att[i*he+h*E:i*he+(h+1)*E], d.qkv[i*qs+h*E:i*qs+(h+1)*E],
					d.kc[l][base+g*E:], d.vc[l][base+g*E:], sc[:n], ge, scale)
			}
		}
	})
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
	cand []int     // candidate ids, most likely first
}

func newDrawer(v int, opt SampleOptions) *drawer {
	return &drawer{opt: opt, lp: make([]float64, v), p: make([]float64, v), cand: make([]int, v)}
}

// drawToken returns the drawn (or greedy) token of logits row z, its
// log-prob under log_softmax(z / T) over the full vocabulary, and the exact
// entropy of that distribution. The draw is among dr.candidates(), in
// proportion to their probabilities (renormalised over the candidates).
func drawToken[F Float](dr *drawer, z []F, rng *rand.Rand) (tok int, lp, entropy float64) {
	best, entropy := softmax(dr, z)
	if dr.opt.Greedy {
		return best, dr.lp[best], entropy
	}
	cand := dr.candidates()
	var total float64
	for _, id := range cand {
		total += dr.p[id]
	}
	u := rng.Float64() * total
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

// candidates lists the tokens that may be drawn, as Hugging Face generate
// (temperature, then TopKLogitsWarper, then TopPLogitsWarper) and vLLM
// choose them: all tokens when neither TopK nor TopP filters; otherwise,
// most likely first (lowest id first among ties), the tokens at least as
// likely as the TopK-th most likely one (ties with it are kept), then the
// smallest prefix of those whose probability, renormalised over them,
// reaches TopP (the token crossing TopP included, always at least one).
func (dr *drawer) candidates() []int {
	k, p := dr.opt.TopK, dr.opt.TopP
	cand := dr.cand[:len(dr.lp)]
	for i := range cand {
		cand[i] = i
	}
	filterK, filterP := k > 0 && k < len(cand), p > 0 && p < 1
	if !filterK && !filterP {
		return cand
	}
	slices.SortStableFunc(cand, func(a, b int) int { return cmp.Compare(dr.lp[b], dr.lp[a]) })
	if filterK {
		cand = dr.topK(cand, k)
	}
	if filterP {
		cand = dr.topP(cand, p)
	}
	return cand
}

// topK cuts cand (sorted, most likely first) after the k-th token and the
// tokens tied with it: TopKLogitsWarper removes only scores below the k-th
// largest.
func (dr *drawer) topK(cand []int, k int) []int {
	kth := dr.lp[cand[k-1]]
	for k < len(cand) && dr.lp[cand[k]] >= kth {
		k++
	}
	return cand[:k]
}

// topP returns the smallest prefix of cand (sorted, most likely first)
// whose probability mass, renormalised over cand, reaches p.
func (dr *drawer) topP(cand []int, p float64) []int {
	var total, cum float64
	for _, id := range cand {
		total += dr.p[id]
	}
	for i, id := range cand {
		cum += dr.p[id]
		if cum/total >= p {
			return cand[:i+1]
		}
	}
	return cand
}
