package tokenizer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// Char's tokenizer.json is a Hugging Face one that the library encodes
// and decodes exactly as Char does (TestLongCharReference): a BPE model
// without merges over the character table, so that each character is its
// own token; no normalizer or pre-tokenizer; the specials as added special
// tokens, whose names hold a character outside printable ASCII, so that
// no text Char accepts contains one (the library would match it as the
// special token); BOS before a sequence (TemplateProcessing); the tokens
// fused on decode. tokenizer_config.json names the specials for the
// transformers library.

// charHFFile is the tokenizer.json of a Char.
type charHFFile struct {
	Version       string       `json:"version"`
	Truncation    any          `json:"truncation"`
	Padding       any          `json:"padding"`
	AddedTokens   []addedToken `json:"added_tokens"`
	Normalizer    any          `json:"normalizer"`
	PreTokenizer  any          `json:"pre_tokenizer"`
	PostProcessor any          `json:"post_processor"`
	Decoder       any          `json:"decoder"`
	Model         charHFModel  `json:"model"`
}

// charHFModel is the BPE model of a Char's tokenizer.json.
type charHFModel struct {
	Type                    string         `json:"type"`
	Dropout                 any            `json:"dropout"`
	UnkToken                any            `json:"unk_token"`
	ContinuingSubwordPrefix any            `json:"continuing_subword_prefix"`
	EndOfWordSuffix         any            `json:"end_of_word_suffix"`
	FuseUnk                 bool           `json:"fuse_unk"`
	ByteFallback            bool           `json:"byte_fallback"`
	IgnoreMerges            bool           `json:"ignore_merges"`
	Vocab                   map[string]int `json:"vocab"`
	Merges                  []string       `json:"merges"`
}

// hfFile returns t as a Hugging Face tokenizer.json.
func (t *Char) hfFile() charHFFile {
	vocab := make(map[string]int, len(t.vocab))
	for id, tok := range t.vocab {
		vocab[tok] = id
	}
	var added []addedToken
	for id := range numSpecial {
		added = append(added, addedToken{ID: id, Content: t.vocab[id], Special: true})
	}
	bos := t.vocab[BosID]
	seq := func(id string, typ int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
	}
	special := map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}}
	return charHFFile{
		Version: "1.0", AddedTokens: added,
		PostProcessor: map[string]any{"type": "TemplateProcessing",
			"single":         []any{special, seq("A", 0)},
			"pair":           []any{special, seq("A", 0), seq("B", 1)},
			"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int{BosID}, "tokens": []string{bos}}}},
		Decoder: map[string]any{"type": "Fuse"},
		Model:   charHFModel{Type: "BPE", Vocab: vocab, Merges: []string{}},
	}
}

// Save writes t as dir/tokenizer.json (charHFFile) and
// dir/tokenizer_config.json, each atomically (temp file, fsync, rename).
func (t *Char) Save(dir string) error {
	config := map[string]any{"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": false,
		"bos_token": t.vocab[BosID], "eos_token": t.vocab[EosID], "pad_token": t.vocab[PadID]}
	for name, v := range map[string]any{FileName: t.hfFile(), TokenizerConfigFile: config} {
		data, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			return fmt.Errorf("save tokenizer %s: %w", dir, err)
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, name), append(data, '\n')); err != nil {
			return fmt.Errorf("save tokenizer %s: %w", dir, err)
		}
	}
	return nil
}

// charFromHF returns the Char whose tokenizer.json data is (false when it
// is any other Hugging Face file, even one differing only in a detail:
// HF reads those).
func charFromHF(data []byte) (*Char, bool) {
	var f struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if json.Unmarshal(data, &f) != nil || len(f.Model.Vocab) < numSpecial {
		return nil, false
	}
	table := make([]string, len(f.Model.Vocab))
	for tok, id := range f.Model.Vocab {
		if id < 0 || id >= len(table) || table[id] != "" {
			return nil, false
		}
		table[id] = tok
	}
	c, err := newCharFromVocab(table)
	if err != nil {
		return nil, false
	}
	var got, want any
	wantData, err := json.Marshal(c.hfFile())
	if err != nil || json.Unmarshal(data, &got) != nil || json.Unmarshal(wantData, &want) != nil || !reflect.DeepEqual(got, want) {
		return nil, false
	}
	return c, true
}
