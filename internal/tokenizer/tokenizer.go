package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrUnknownChar is returned (wrapped) by Encode for a character the
// vocabulary has no token for.
var ErrUnknownChar = errors.New("tokenizer: character not in vocabulary")

// Tokenizer maps text to token ids and back.
type Tokenizer interface {
	// Encode returns the ids of s, without BOS/EOS. It fails on the first
	// character it cannot encode, naming its byte position and rune.
	Encode(s string) ([]int, error)
	// EncodePrompt returns the ids the model reads for the text s on its
	// own: Encode(s) with the special tokens the tokenizer puts around a
	// sequence (BOS in front for Char and Llama; nothing for a tokenizer
	// without them).
	EncodePrompt(s string) ([]int, error)
	// Decode returns the text of ids, skipping PAD and BOS. It does not stop
	// at EOS (the caller cuts there); EOS and ids out of range decode to "".
	Decode(ids []int) string
	// VocabSize is the number of ids, i.e. the model's vocab_size.
	VocabSize() int
	// BOS is the begin-of-sequence id.
	BOS() int
	// EOS is the end-of-sequence id.
	EOS() int
	// PAD is the padding id.
	PAD() int
	// Name identifies the tokenizer kind, e.g. "mgrpo-char".
	Name() string
}

// Ids of the special tokens of the built-in character tokenizer.
const (
	PadID = 0
	BosID = 1
	EosID = 2
)

// Special token strings as saved in tokenizer.json. Each holds U+FF5C
// (FULLWIDTH VERTICAL LINE), outside printable ASCII, so that no text Char
// encodes contains one: Hugging Face's tokenizers would read it as the
// special token (charHFFile).
const (
	PadToken = "<｜pad｜>"
	BosToken = "<｜bos｜>"
	EosToken = "<｜eos｜>"
)

// First and last printable ASCII characters of the built-in table.
const (
	firstChar  = 0x20
	lastChar   = 0x7E
	numSpecial = 3
)

// CharName is the Name and the tokenizer.json "type" of Char.
const CharName = "mgrpo-char"

// Char is a character-level tokenizer: ids 0..2 are PAD, BOS, EOS and every
// further id is one rune. It is immutable and safe for concurrent use.
type Char struct {
	vocab []string     // id -> token text
	ids   map[rune]int // rune -> id, for ids >= numSpecial
}

var _ Tokenizer = (*Char)(nil)

// NewChar returns the built-in character tokenizer: PAD, BOS, EOS, then
// printable ASCII 0x20..0x7E in order (98 ids; table in the package doc).
func NewChar() *Char {
	vocab := []string{PadToken, BosToken, EosToken}
	for c := rune(firstChar); c <= lastChar; c++ {
		vocab = append(vocab, string(c))
	}
	t, err := newCharFromVocab(vocab)
	if err != nil {
		panic("tokenizer: built-in table invalid: " + err.Error())
	}
	return t
}

// newCharFromVocab builds a Char from an id->token table whose first three
// entries are the specials and whose other entries are distinct single runes.
func newCharFromVocab(vocab []string) (*Char, error) {
	if len(vocab) < numSpecial {
		return nil, fmt.Errorf("vocab has %d entries, need at least %d specials", len(vocab), numSpecial)
	}
	for i, want := range []string{PadToken, BosToken, EosToken} {
		if vocab[i] != want {
			return nil, fmt.Errorf("vocab[%d] = %q, want %q", i, vocab[i], want)
		}
	}
	ids := make(map[rune]int, len(vocab))
	for id := numSpecial; id < len(vocab); id++ {
		r, size := utf8.DecodeRuneInString(vocab[id])
		if vocab[id] == "" || size != len(vocab[id]) || r == utf8.RuneError {
			return nil, fmt.Errorf("vocab[%d] = %q is not a single character", id, vocab[id])
		}
		if prev, dup := ids[r]; dup {
			return nil, fmt.Errorf("vocab[%d] = %q duplicates vocab[%d]", id, vocab[id], prev)
		}
		ids[r] = id
	}
	return &Char{vocab: append([]string(nil), vocab...), ids: ids}, nil
}

// Encode returns one id per character of s.
func (t *Char) Encode(s string) ([]int, error) {
	out := make([]int, 0, len(s))
	for pos, r := range s {
		id, ok := t.ids[r]
		if !ok {
			return nil, fmt.Errorf("encode %q: position %d: %q (U+%04X): %w", s, pos, r, r, ErrUnknownChar)
		}
		out = append(out, id)
	}
	return out, nil
}

// EncodePrompt returns BOS followed by Encode(s).
func (t *Char) EncodePrompt(s string) ([]int, error) {
	ids, err := t.Encode(s)
	if err != nil {
		return nil, err
	}
	return append([]int{BosID}, ids...), nil
}

// Decode concatenates the characters of ids, skipping PAD, BOS, EOS and
// ids outside the vocabulary.
func (t *Char) Decode(ids []int) string {
	var b strings.Builder
	b.Grow(len(ids))
	for _, id := range ids {
		if id < numSpecial || id >= len(t.vocab) {
			continue
		}
		b.WriteString(t.vocab[id])
	}
	return b.String()
}

// VocabSize returns the number of ids (98 for NewChar).
func (t *Char) VocabSize() int { return len(t.vocab) }

// BOS returns 1.
func (t *Char) BOS() int { return BosID }

// EOS returns 2.
func (t *Char) EOS() int { return EosID }

// PAD returns 0.
func (t *Char) PAD() int { return PadID }

// Name returns "mgrpo-char".
func (t *Char) Name() string { return CharName }

// Vocab returns a copy of the id -> token table.
func (t *Char) Vocab() []string { return append([]string(nil), t.vocab...) }

// Token returns the text of one id ("" when out of range); specials give
// their names (PadToken, BosToken, EosToken).
func (t *Char) Token(id int) string {
	if id < 0 || id >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}
