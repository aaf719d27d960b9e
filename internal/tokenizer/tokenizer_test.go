package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestIDTable pins the documented id table (package doc); changing it breaks
// every saved checkpoint.
func TestIDTable(t *testing.T) {
	tok := NewChar()
	if got := tok.VocabSize(); got != 98 {
		t.Fatalf("VocabSize = %d, want 98", got)
	}
	cases := []struct {
		text string
		id   int
	}{
		{" ", 3}, {"!", 4}, {"+", 14}, {"0", 19}, {"9", 28}, {"=", 32},
		{"?", 34}, {"A", 36}, {"a", 68}, {"z", 93}, {"~", 97},
	}
	for _, c := range cases {
		ids, err := tok.Encode(c.text)
		if err != nil || len(ids) != 1 || ids[0] != c.id {
			t.Errorf("Encode(%q) = %v, %v; want [%d]", c.text, ids, err, c.id)
		}
	}
	if tok.PAD() != 0 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Errorf("specials PAD/BOS/EOS = %d/%d/%d, want 0/1/2", tok.PAD(), tok.BOS(), tok.EOS())
	}
	if tok.Name() != "mgrpo-char" {
		t.Errorf("Name = %q", tok.Name())
	}
}

func TestRoundTripEveryPrintable(t *testing.T) {
	tok := NewChar()
	var b strings.Builder
	for c := byte(0x20); c <= 0x7E; c++ {
		b.WriteByte(c)
	}
	s := b.String()
	ids, err := tok.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != i+3 {
			t.Errorf("id of %q = %d, want %d", s[i], id, i+3)
		}
	}
	if got := tok.Decode(ids); got != s {
		t.Errorf("Decode(Encode(s)) = %q, want %q", got, s)
	}
}

func TestEncodeErrors(t *testing.T) {
	tok := NewChar()
	cases := []struct {
		in, wantSub string
	}{
		{"12é", `position 2: 'é' (U+00E9)`},
		{"a\nb", `position 1: '\n' (U+000A)`},
		{"\x7f", `position 0`},
	}
	for _, c := range cases {
		_, err := tok.Encode(c.in)
		if !errors.Is(err, ErrUnknownChar) || !strings.Contains(err.Error(), c.wantSub) {
			t.Errorf("Encode(%q) error = %v, want ErrUnknownChar containing %q", c.in, err, c.wantSub)
		}
	}
}

func TestDecodeSkipsSpecials(t *testing.T) {
	tok := NewChar()
	got := tok.Decode([]int{BosID, 19, PadID, 20, EosID, 21, 98, -1})
	if got != "012" {
		t.Errorf("Decode = %q, want %q", got, "012")
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	if err := NewChar().Save(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := tok.(*Char)
	if !ok || c.VocabSize() != 98 || c.Token(19) != "0" {
		t.Fatalf("Load = %#v", tok)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries after Save, want tokenizer.json and tokenizer_config.json (no temp files)", len(entries))
	}
}

// TestLoadLegacyChar: a checkpoint written before Char saved a Hugging
// Face tokenizer.json still loads, as the same table.
func TestLoadLegacyChar(t *testing.T) {
	dir := t.TempDir()
	vocab := append([]string{"<pad>", "<bos>", "<eos>"}, NewChar().Vocab()[numSpecial:]...)
	data, _ := json.Marshal(map[string]any{"type": CharName, "vocab": vocab})
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if c, ok := tok.(*Char); err != nil || !ok || !slices.Equal(c.Vocab(), NewChar().Vocab()) {
		t.Fatalf("Load(legacy) = %v, %v", tok, err)
	}
}

// TestCharFileEditedLoadsAsHF: a tokenizer.json that differs from what
// Char.Save writes (here by a normalizer) is read as the Hugging Face file
// it is, never as a Char that would ignore the difference.
func TestCharFileEditedLoadsAsHF(t *testing.T) {
	dir := t.TempDir()
	if err := NewChar().Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	data, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["normalizer"] = map[string]any{"type": "Lowercase"}
	data, _ = json.Marshal(m)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := tok.Encode("AB")
	if _, ok := tok.(*HF); !ok || !slices.Equal(ids, []int{68, 69}) {
		t.Fatalf("Load(edited) = %T, Encode(\"AB\") = %v; want an HF encoding [68 69] (\"ab\")", tok, ids)
	}
}

func TestLoadMissingGivesBuiltin(t *testing.T) {
	tok, err := Load(t.TempDir())
	if err != nil || tok.Name() != CharName || tok.VocabSize() != 98 {
		t.Fatalf("Load(empty dir) = %v, %v", tok, err)
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, body string
		is         error
		wantSub    string
	}{
		{"hf wordpiece", `{"version":"1.0","model":{"type":"WordPiece","vocab":{"a":0}}}`, ErrNotSupported, "WordPiece"},
		{"not json", `{`, nil, "not JSON"},
		{"unknown type", `{"type":"wordpiece"}`, nil, "unknown tokenizer type"},
		{"bad specials", `{"type":"mgrpo-char","vocab":["<bos>","<pad>","<eos>"]}`, nil, `vocab[0]`},
		{"duplicate", `{"type":"mgrpo-char","vocab":["<pad>","<bos>","<eos>","a","a"]}`, nil, "duplicates"},
		{"multi-char", `{"type":"mgrpo-char","vocab":["<pad>","<bos>","<eos>","ab"]}`, nil, "single character"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), c.wantSub) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: Load error = %v, want one containing %q", c.name, err, c.wantSub)
		}
	}
}

func ExampleChar_Encode() {
	tok := NewChar()
	ids, _ := tok.Encode("12+3=")
	fmt.Println(ids, tok.Decode(ids))
	// Output: [20 21 14 22 32] 12+3=
}
