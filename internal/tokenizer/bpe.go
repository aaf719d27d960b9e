package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// bpe is the BPE model of a tokenizer.json: a vocabulary, ranked merges,
// and what to do with a character outside the vocabulary (its bytes as
// <0xXX> tokens with byte_fallback, else the unknown token, runs of them
// fused with fuse_unk, else dropped, as Hugging Face's tokenizers does).
type bpe struct {
	vocab        map[string]int
	tokens       []string         // id -> token ("" for ids without one)
	merges       map[uint64]merge // by pairKey
	unk          int              // -1: none
	fuseUnk      bool
	byteFallback bool
	byteIDs      [256]int // <0xXX> ids, -1 where missing
	ignoreMerges bool

	cache sync.Map     // word -> []int
	size  atomic.Int64 // words cached
}

// pairKey is the map key of the pair of ids (a, b).
func pairKey(a, b int) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }

// merge is the result of merging a pair: its rank (lower merges first) and
// the id of the merged token.
type merge struct{ rank, id int }

// maxCachedWords bounds the word cache (Hugging Face's default capacity).
const maxCachedWords = 10000

// bpeJSON is the "model" object of a BPE tokenizer.json.
type bpeJSON struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

// newBPE builds the model; anything it does not implement is an error
// naming the key.
func newBPE(m bpeJSON) (*bpe, error) {
	switch {
	case m.Type != "BPE":
		return nil, fmt.Errorf("model.type %q: %w (only BPE is implemented)", m.Type, ErrNotSupported)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("model.dropout %g: BPE dropout is %w", *m.Dropout, ErrNotSupported)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("model.continuing_subword_prefix %q: %w", *m.ContinuingSubwordPrefix, ErrNotSupported)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("model.end_of_word_suffix %q: %w", *m.EndOfWordSuffix, ErrNotSupported)
	case len(m.Vocab) == 0:
		return nil, fmt.Errorf("model.vocab is empty")
	}
	b := &bpe{vocab: m.Vocab, unk: -1, fuseUnk: m.FuseUnk, byteFallback: m.ByteFallback, ignoreMerges: m.IgnoreMerges}
	n := 0
	for tok, id := range m.Vocab {
		if id < 0 || id >= MaxVocab {
			return nil, fmt.Errorf("model.vocab[%q] = %d: outside [0, %d)", tok, id, MaxVocab)
		}
		n = max(n, id+1)
	}
	b.tokens = make([]string, n)
	for tok, id := range m.Vocab {
		b.tokens[id] = tok
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		b.unk = id
	}
	for i := range b.byteIDs {
		b.byteIDs[i] = -1
		if id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			b.byteIDs[i] = id
		}
	}
	if err := b.readMerges(m.Merges); err != nil {
		return nil, err
	}
	return b, nil
}

// readMerges reads merges written as "a b" strings or as ["a", "b"] pairs.
func (b *bpe) readMerges(raw []json.RawMessage) error {
	b.merges = make(map[uint64]merge, len(raw))
	for rank, r := range raw {
		var pair [2]string
		var s string
		if err := json.Unmarshal(r, &s); err == nil {
			l, rr, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(rr, " ") {
				return fmt.Errorf("model.merges[%d] = %q: want two tokens separated by one space", rank, s)
			}
			pair = [2]string{l, rr}
		} else if err := json.Unmarshal(r, &pair); err != nil {
			return fmt.Errorf("model.merges[%d] = %s: want \"a b\" or [\"a\", \"b\"]", rank, r)
		}
		a, okA := b.vocab[pair[0]]
		c, okC := b.vocab[pair[1]]
		id, okID := b.vocab[pair[0]+pair[1]]
		if !okA || !okC || !okID {
			return fmt.Errorf("model.merges[%d] = %q: a token of it or of its result is not in the vocabulary", rank, pair)
		}
		if _, dup := b.merges[pairKey(a, c)]; !dup {
			b.merges[pairKey(a, c)] = merge{rank: rank, id: id}
		}
	}
	return nil
}

// encodeWord appends the ids of one pre-tokenized word to dst.
func (b *bpe) encodeWord(dst []int, word string) []int {
	if ids, ok := b.cache.Load(word); ok {
		return append(dst, ids.([]int)...)
	}
	var ids []int
	if id, ok := b.vocab[word]; ok && b.ignoreMerges {
		ids = []int{id}
	} else {
		ids = b.mergeWord(b.symbols(word))
	}
	b.remember(word, ids)
	return append(dst, ids...)
}

// remember caches the ids of a word while the cache has room.
func (b *bpe) remember(word string, ids []int) {
	if b.size.Load() < maxCachedWords && b.size.Add(1) <= maxCachedWords {
		b.cache.Store(word, ids)
	}
}

// symbols splits a word into its initial symbols: one per character in the
// vocabulary, the character's bytes as <0xXX> tokens (byte_fallback), or
// the unknown token.
func (b *bpe) symbols(word string) []int {
	syms := make([]int, 0, len(word))
	prevUnk := false
	for i := 0; i < len(word); {
		_, size := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+size]
		i += size
		if id, ok := b.vocab[ch]; ok {
			syms, prevUnk = append(syms, id), false
			continue
		}
		if b.byteFallback && b.hasBytes(ch) {
			for j := 0; j < len(ch); j++ {
				syms = append(syms, b.byteIDs[ch[j]])
			}
			prevUnk = false
			continue
		}
		if b.unk < 0 {
			continue // no unknown token: the character is dropped, as Hugging Face does
		}
		if !(b.fuseUnk && prevUnk) {
			syms = append(syms, b.unk)
		}
		prevUnk = true
	}
	return syms
}

// hasBytes reports whether every byte of ch has a <0xXX> token.
func (b *bpe) hasBytes(ch string) bool {
	for j := 0; j < len(ch); j++ {
		if b.byteIDs[ch[j]] < 0 {
			return false
		}
	}
	return true
}

// mergeWord applies the merges to syms, lowest rank first and leftmost
// first among equal ranks, and returns the resulting ids.
func (b *bpe) mergeWord(syms []int) []int {
	if len(syms) < 2 {
		return syms
	}
	n := len(syms)
	prev, next := make([]int, n), make([]int, n)
	alive := make([]bool, n)
	for i := range n {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	q := make(pairQueue, 0, n)
	for i := 0; i+1 < n; i++ {
		if m, ok := b.merges[pairKey(syms[i], syms[i+1])]; ok {
			q = append(q, candidate{rank: m.rank, pos: i, id: m.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		r := next[c.pos]
		if !alive[c.pos] || r < 0 {
			continue
		}
		if m, ok := b.merges[pairKey(syms[c.pos], syms[r])]; !ok || m.id != c.id || m.rank != c.rank {
			continue // the pair changed since it was queued
		}
		syms[c.pos] = c.id
		alive[r] = false
		next[c.pos] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			if m, ok := b.merges[pairKey(syms[p], syms[c.pos])]; ok {
				heap.Push(&q, candidate{rank: m.rank, pos: p, id: m.id})
			}
		}
		if nx := next[c.pos]; nx >= 0 {
			if m, ok := b.merges[pairKey(syms[c.pos], syms[nx])]; ok {
				heap.Push(&q, candidate{rank: m.rank, pos: c.pos, id: m.id})
			}
		}
	}
	out := make([]int, 0, n)
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// candidate is a queued merge of the symbol at pos with its right
// neighbour.
type candidate struct{ rank, pos, id int }

// pairQueue is a min-heap of candidates by (rank, pos).
type pairQueue []candidate

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(candidate)) }
func (q *pairQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}
