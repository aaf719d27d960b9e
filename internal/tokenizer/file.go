package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// FileName is the tokenizer file inside a checkpoint directory.
const FileName = "tokenizer.json"

// ErrNotSupported is wrapped by Load's error for a tokenizer.json that
// asks for something this package does not implement (a WordPiece or
// Unigram model, a normaliser, pre-tokenizer or decoder it lacks, ...),
// so that no text is ever tokenised differently from Hugging Face's
// tokenizers.
var ErrNotSupported = errors.New("not supported")

// charFile is the JSON form of a Char: {"type":"mgrpo-char","vocab":[...]}.
type charFile struct {
	Type  string   `json:"type"`
	Vocab []string `json:"vocab"`
}

// probe holds the keys that tell the tokenizer.json kinds apart.
type probe struct {
	Type  string `json:"type"`
	Model *struct {
		Type string `json:"type"`
	} `json:"model"`
}

// Save writes t as dir/tokenizer.json atomically (temp file, fsync, rename).
func (t *Char) Save(dir string) error {
	data, err := json.MarshalIndent(charFile{Type: CharName, Vocab: t.vocab}, "", " ")
	if err != nil {
		return fmt.Errorf("save tokenizer %s: %w", dir, err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, FileName), append(data, '\n')); err != nil {
		return fmt.Errorf("save tokenizer %s: %w", dir, err)
	}
	return nil
}

// Load reads dir/tokenizer.json. A missing file gives the built-in
// character tokenizer (NewChar); an mgrpo-char file gives a Char with its
// saved table; a Hugging Face tokenizer.json (a "model" object) gives an
// HF with its special tokens from the files beside it (loadHF). What it
// cannot tokenise exactly is refused with an error naming the key.
func Load(dir string) (Tokenizer, error) {
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewChar(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	tok, err := parse(dir, data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	return tok, nil
}

// parse decodes the bytes of dir's tokenizer.json.
func parse(dir string, data []byte) (Tokenizer, error) {
	var p probe
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	switch {
	case p.Type == CharName:
		var f charFile
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, err
		}
		return newCharFromVocab(f.Vocab)
	case p.Model != nil:
		return loadHF(dir, data)
	default:
		return nil, fmt.Errorf("unknown tokenizer type %q (want %q or a Hugging Face tokenizer.json)", p.Type, CharName)
	}
}
