package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileName is the tokenizer file inside a checkpoint directory.
const FileName = "tokenizer.json"

// ErrNotSupported is wrapped by Load's error for a tokenizer.json that
// asks for something this package does not implement (a WordPiece or
// Unigram model, a normaliser, pre-tokenizer or decoder it lacks, ...),
// so that no text is ever tokenised differently from Hugging Face's
// tokenizers.
var ErrNotSupported = errors.New("not supported")

// legacyCharFile is the tokenizer.json a Char was saved as before it
// wrote a Hugging Face one: {"type":"mgrpo-char","vocab":[...]}, with the
// specials named legacySpecials. Load still reads it.
type legacyCharFile struct {
	Type  string   `json:"type"`
	Vocab []string `json:"vocab"`
}

// legacySpecials are the names of PAD, BOS and EOS in a legacyCharFile.
var legacySpecials = []string{"<pad>", "<bos>", "<eos>"}

// probe holds the keys that tell the tokenizer.json kinds apart.
type probe struct {
	Type  string `json:"type"`
	Model *struct {
		Type string `json:"type"`
	} `json:"model"`
}

// Load reads dir/tokenizer.json. A missing file gives the built-in
// character tokenizer (NewChar); a file that Char.Save wrote, or an older
// mgrpo-char file, gives a Char with its saved table; any other Hugging
// Face tokenizer.json (a "model" object) gives an HF with its special
// tokens from the files beside it (loadHF). What it
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
		var f legacyCharFile
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, err
		}
		for i, name := range legacySpecials {
			if i < len(f.Vocab) && f.Vocab[i] == name {
				f.Vocab[i] = []string{PadToken, BosToken, EosToken}[i]
			}
		}
		return newCharFromVocab(f.Vocab)
	case p.Model != nil:
		if c, ok := charFromHF(data); ok {
			return c, nil
		}
		return loadHF(dir, data)
	default:
		return nil, fmt.Errorf("unknown tokenizer type %q (want %q or a Hugging Face tokenizer.json)", p.Type, CharName)
	}
}
