package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyByteLevel is a byte-level BPE tokenizer.json small enough to check
// by hand: the merges build "Ġa", "ab" and "Ġab".
const tinyByteLevel = `{
 "version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [
  {"id": 0, "content": "<|bos|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 1, "content": "<|eos|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
 "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "post_processor": {"type": "TemplateProcessing",
  "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
  "pair": [], "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [0], "tokens": ["<|bos|>"]}}},
 "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
  "vocab": {"<|bos|>": 0, "<|eos|>": 1, "a": 2, "b": 3, "Ġ": 4, "Ġa": 5, "ab": 6, "Ġab": 7, "!": 8, "Ã": 9, "©": 10},
  "merges": ["Ġ a", "a b", "Ġa b"]}
}`

func writeTokenizer(t *testing.T, body string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHFEncodeDecode(t *testing.T) {
	dir := writeTokenizer(t, tinyByteLevel, map[string]string{
		TokenizerConfigFile: `{"bos_token": "<|bos|>", "eos_token": {"content": "<|eos|>"}, "chat_template": "{{ messages }}"}`,
	})
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	hf := tok.(*HF)
	cases := []struct {
		in   string
		want []int
	}{
		{"ab", []int{6}},
		{" ab", []int{7}},
		{"a ab!", []int{2, 7, 8}},
		{"ab<|eos|>ab", []int{6, 1, 6}},
		{"é", []int{9, 10}},
	}
	for _, c := range cases {
		got, err := hf.Encode(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if got, _ := hf.EncodePrompt("ab"); !slices.Equal(got, []int{0, 6}) {
		t.Errorf("EncodePrompt = %v, want [0 6]", got)
	}
	if got := hf.Decode([]int{0, 2, 7, 1, 8, 99, -1}); got != "a ab!" {
		t.Errorf("Decode = %q", got)
	}
	if hf.BOS() != 0 || hf.EOS() != 1 || hf.PAD() != -1 || hf.VocabSize() != 11 || hf.ChatTemplate() != "{{ messages }}" {
		t.Errorf("specials %d/%d/%d vocab %d chat %q", hf.BOS(), hf.EOS(), hf.PAD(), hf.VocabSize(), hf.ChatTemplate())
	}
	out := t.TempDir()
	if err := hf.Save(out); err != nil {
		t.Fatal(err)
	}
	again, err := Load(out)
	if err != nil || again.EOS() != 1 || again.(*HF).ChatTemplate() != "{{ messages }}" {
		t.Fatalf("reload after Save: %v, %v", again, err)
	}
}

func TestValidUTF8MaximalSubparts(t *testing.T) {
	cases := map[string]string{
		"ok é":             "ok é",
		"a\xe2\x82b":       "a\uFFFDb",
		"\xf0\x9f\x98":     "\uFFFD",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD",
		"\xc0\xaf":         "\uFFFD\uFFFD",
		"\xff\xfe":         "\uFFFD\uFFFD",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xe0\xa0":         "\uFFFD",
	}
	for in, want := range cases {
		if got := validUTF8(in); got != want {
			t.Errorf("validUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHFRefusals: what the file asks for and is not implemented is
// refused with one line naming it.
func TestHFRefusals(t *testing.T) {
	cases := []struct {
		name, from, to, wantSub string
		unsupported             bool
	}{
		{"unigram", `"type": "BPE"`, `"type": "Unigram"`, `model.type "Unigram"`, true},
		{"normalizer", `"normalizer": null`, `"normalizer": {"type": "BertNormalizer"}`, `normalizer.type "BertNormalizer"`, true},
		{"pre-tokenizer", `"pre_tokenizer": {"type": "ByteLevel"`, `"pre_tokenizer": {"type": "Whitespace"`, `pre_tokenizer.type "Whitespace"`, true},
		{"decoder", `"decoder": {"type": "ByteLevel"`, `"decoder": {"type": "WordPiece"`, `decoder.type "WordPiece"`, true},
		{"post-processor", `"post_processor": {"type": "TemplateProcessing"`, `"post_processor": {"type": "BertProcessing"`, `post_processor.type "BertProcessing"`, true},
		{"dropout", `"dropout": null`, `"dropout": 0.1`, "model.dropout", true},
		{"truncation", `"truncation": null`, `"truncation": {"max_length": 8}`, "truncation", true},
		{"bad merge", `"Ġa b"`, `"Ġa c"`, "model.merges[2]", false},
	}
	for _, c := range cases {
		body := strings.Replace(tinyByteLevel, c.from, c.to, 1)
		if body == tinyByteLevel {
			t.Fatalf("%s: %q not in the test tokenizer", c.name, c.from)
		}
		_, err := Load(writeTokenizer(t, body, map[string]string{TokenizerConfigFile: `{"eos_token": "<|eos|>"}`}))
		if err == nil || !strings.Contains(err.Error(), c.wantSub) || errors.Is(err, ErrNotSupported) != c.unsupported {
			t.Errorf("%s: Load error = %v, want one naming %q (not supported: %t)", c.name, err, c.wantSub, c.unsupported)
		}
	}
	if _, err := Load(writeTokenizer(t, tinyByteLevel, nil)); err == nil || !strings.Contains(err.Error(), "no end-of-sequence token") {
		t.Errorf("no EOS anywhere: Load error = %v", err)
	}
	_, err := Load(writeTokenizer(t, tinyByteLevel, map[string]string{GenerationConfigFile: `{"eos_token_id": [1, 0]}`}))
	if err != nil {
		t.Errorf("EOS from generation_config.json: %v", err)
	}
	_, err = Load(writeTokenizer(t, tinyByteLevel, map[string]string{TokenizerConfigFile: `{"eos_token": "<|nope|>"}`}))
	if err == nil || !strings.Contains(err.Error(), `eos_token "<|nope|>" is not in tokenizer.json`) {
		t.Errorf("unknown EOS: Load error = %v", err)
	}
}

// TestHFConcurrentEncode: one tokenizer serves several goroutines (its
// word cache is the only shared state); run with -race.
func TestHFConcurrentEncode(t *testing.T) {
	tok, err := Load(writeTokenizer(t, tinyByteLevel, map[string]string{TokenizerConfigFile: `{"eos_token": "<|eos|>"}`}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []int, 8)
	for g := range 8 {
		go func() {
			var last []int
			for i := range 200 {
				last, _ = tok.Encode(strings.Repeat("a ab!", 1+(g+i)%5))
			}
			done <- last
		}()
	}
	for range 8 {
		if ids := <-done; len(ids) == 0 {
			t.Error("no ids")
		}
	}
}
