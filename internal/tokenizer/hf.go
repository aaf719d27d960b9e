package tokenizer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// HFName is the Name of a Hugging Face tokenizer.json tokenizer.
const HFName = "hf-bpe"

// MaxVocab bounds the ids a tokenizer.json may use.
const MaxVocab = 1 << 22

// HF is a Hugging Face tokenizer.json with a BPE model: byte-level BPE
// behind a regex pre-tokenizer (GPT-2, Llama 3, SmolLM2, Qwen) or BPE with
// byte fallback behind a SentencePiece-style normaliser or Metaspace
// pre-tokenizer (Llama 2, TinyLlama, Mistral). It encodes as Hugging
// Face's tokenizers does with add_special_tokens=False: added tokens in
// the text (special ones included) are found first, the rest is
// normalised, pre-tokenized and merged. Ill-formed UTF-8 is first replaced
// by U+FFFD per maximal subpart, as a JavaScript or Rust caller's decoding
// would. It is immutable apart from an internal word cache and safe for
// concurrent use.
type HF struct {
	model     *bpe
	rawMatch  *matcher // added tokens matched in the raw text
	normMatch *matcher // added tokens matched in normalised text
	normalize normalizer
	preTok    preTokenizer
	decode    decoder
	prefix    []int // ids the post-processor puts before a single sequence
	suffix    []int
	added     map[int]*addedToken
	special   map[string]bool // text of the special added tokens
	vocabSize int
	bos, eos  int
	pad       int
	chat      string // chat template ("" for none)
	files     map[string][]byte
}

var _ Tokenizer = (*HF)(nil)

// hfJSON is the top level of tokenizer.json.
type hfJSON struct {
	Version       string          `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

// parseHF builds an HF tokenizer from the bytes of tokenizer.json. The
// special tokens are set by the caller (see Load).
func parseHF(data []byte) (*HF, error) {
	var f hfJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	switch {
	case !isNull(f.Truncation):
		return nil, fmt.Errorf("truncation = %.80s: %w (the trainer cuts sequences itself; set it to null)", f.Truncation, ErrNotSupported)
	case !isNull(f.Padding):
		return nil, fmt.Errorf("padding = %.80s: %w (the trainer pads batches itself; set it to null)", f.Padding, ErrNotSupported)
	}
	var mj bpeJSON
	if err := json.Unmarshal(f.Model, &mj); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	model, err := newBPE(mj)
	if err != nil {
		return nil, err
	}
	t := &HF{model: model, added: map[int]*addedToken{}, special: map[string]bool{}, bos: -1, eos: -1, pad: -1}
	if t.normalize, err = newNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if t.preTok, err = newPreTokenizer(f.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	if t.decode, err = newDecoder(f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	if t.prefix, t.suffix, err = t.postProcessor(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	return t, nil
}

// addTokens registers the added tokens and builds their matchers. Ids
// are assigned as Hugging Face's tokenizers does when it reads the file,
// whatever the file says: a token already in the model's vocabulary (or
// added before) keeps that id, any other gets the next id past the
// vocabulary and the tokens added so far.
func (t *HF) addTokens(list []addedToken) error {
	t.vocabSize = len(t.model.tokens)
	byContent := map[string]int{}
	maxAdded := -1
	var raw, normed []matchEntry
	for i := range list {
		a := &list[i]
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		id, ok := byContent[a.Content]
		if !ok {
			id, ok = t.model.vocab[a.Content]
		}
		if !ok {
			id = len(t.model.vocab)
			if maxAdded >= id {
				id = maxAdded + 1
			}
		}
		if id >= MaxVocab {
			return fmt.Errorf("added_tokens[%d] %q: id %d not below %d", i, a.Content, id, MaxVocab)
		}
		a.ID = id
		byContent[a.Content] = id
		maxAdded = max(maxAdded, id)
		t.added[id] = a
		if a.Special {
			t.special[a.Content] = true
		}
		t.vocabSize = max(t.vocabSize, id+1)
		switch {
		case a.Normalized && t.normalize != nil:
			normed = append(normed, matchEntry{pattern: t.normalize(a.Content), tok: a})
		case a.Normalized:
			normed = append(normed, matchEntry{pattern: a.Content, tok: a})
		default:
			raw = append(raw, matchEntry{pattern: a.Content, tok: a})
		}
	}
	t.rawMatch, t.normMatch = newMatcher(raw), newMatcher(normed)
	return nil
}

// Encode returns the ids of s without the post-processor's special tokens
// (Hugging Face's encode(s, add_special_tokens=False)).
func (t *HF) Encode(s string) ([]int, error) {
	s = validUTF8(s)
	ids := make([]int, 0, len(s)/3+1)
	for _, sp := range t.rawMatch.split(s) {
		if sp.tok != nil {
			ids = append(ids, sp.tok.ID)
			continue
		}
		text := s[sp.lo:sp.hi]
		if t.normalize != nil {
			text = t.normalize(text)
		}
		for _, nsp := range t.normMatch.split(text) {
			if nsp.tok != nil {
				ids = append(ids, nsp.tok.ID)
				continue
			}
			ids = t.encodeText(ids, piece{text: text[nsp.lo:nsp.hi], first: sp.lo == 0 && nsp.lo == 0})
		}
	}
	return ids, nil
}

// encodeText pre-tokenizes one piece of normalised text and appends the
// ids of its words.
func (t *HF) encodeText(ids []int, p piece) []int {
	if p.text == "" {
		return ids
	}
	words := []piece{p}
	if t.preTok != nil {
		words = t.preTok(words)
	}
	for _, w := range words {
		ids = t.model.encodeWord(ids, w.text)
	}
	return ids
}

// EncodePrompt returns the ids of s with the special tokens the
// post-processor adds around a single sequence (Hugging Face's
// encode(s, add_special_tokens=True)), e.g. BOS in front for Llama 2.
func (t *HF) EncodePrompt(s string) ([]int, error) {
	ids, err := t.Encode(s)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(t.prefix)+len(ids)+len(t.suffix))
	out = append(append(append(out, t.prefix...), ids...), t.suffix...)
	return out, nil
}

// Decode returns the text of ids as Hugging Face's decode(ids,
// skip_special_tokens=True): the tokens of the ids (added tokens
// included), less ids outside the vocabulary and tokens whose text is a
// special token's (BOS, EOS and PAD among them), through the decoder.
func (t *HF) Decode(ids []int) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		tok := t.Token(id)
		if tok == "" || t.special[tok] {
			continue
		}
		toks = append(toks, tok)
	}
	if t.decode == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.decode(toks), "")
}

// VocabSize is one more than the largest id of the vocabulary and the
// added tokens.
func (t *HF) VocabSize() int { return t.vocabSize }

// BOS is the begin-of-sequence id, -1 when the tokenizer has none (Qwen).
func (t *HF) BOS() int { return t.bos }

// EOS is the end-of-sequence id: what generation stops at.
func (t *HF) EOS() int { return t.eos }

// PAD is the padding id, -1 when the tokenizer names none.
func (t *HF) PAD() int { return t.pad }

// Name returns "hf-bpe".
func (t *HF) Name() string { return HFName }

// ChatTemplate returns the chat template of tokenizer_config.json (or
// chat_template.jinja), "" when there is none.
func (t *HF) ChatTemplate() string { return t.chat }

// Token returns the text of id, "" when there is none.
func (t *HF) Token(id int) string {
	if a, ok := t.added[id]; ok {
		return a.Content
	}
	if id >= 0 && id < len(t.model.tokens) {
		return t.model.tokens[id]
	}
	return ""
}

// Save writes the files the tokenizer was loaded from (tokenizer.json and
// the special-token and chat-template files beside it) into dir, each
// atomically.
func (t *HF) Save(dir string) error {
	for name, data := range t.files {
		if err := atomicfile.WriteBytes(filepath.Join(dir, name), data); err != nil {
			return fmt.Errorf("save tokenizer %s: %w", dir, err)
		}
	}
	return nil
}
