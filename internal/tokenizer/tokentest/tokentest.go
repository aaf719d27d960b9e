// Package tokentest writes a small Hugging Face tokenizer for tests: a
// byte-level BPE over the 256 bytes (any text encodes), a few merges,
// Qwen's special tokens (<|endoftext|> as PAD, <|im_start|>, <|im_end|>
// as EOS, no BOS) and a ChatML chat template, in tokenizer.json and
// tokenizer_config.json, as a checkpoint directory holds them. It imports
// only the standard library.
package tokentest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Special tokens of the tokenizer.
const (
	PAD       = "<|endoftext|>"
	TurnStart = "<|im_start|>" // a chat turn's opener (the tokenizer has no BOS)
	EOS       = "<|im_end|>"
)

// merges build a few longer tokens, so that encoding is not byte by byte.
var merges = [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"Ġ", "a"}, {"a", "n"}, {"Ġ", "#"}, {"#", "#"}, {"Ġ#", "##"}}

// ChatTemplate is the tokenizer's chat template: ChatML turns, and the
// assistant's opener when a generation prompt is asked for.
const ChatTemplate = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// byteChars are the characters byte-level BPE writes each byte as (GPT-2's
// table): printable Latin-1 as itself, the rest from U+0100 on.
func byteChars() []string {
	out := make([]string, 256)
	next := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			out[b] = string(rune(b))
			continue
		}
		out[b] = string(rune(256 + next))
		next++
	}
	return out
}

// Write writes tokenizer.json and tokenizer_config.json into dir (made
// if missing) and returns the number of ids.
func Write(dir string) (int, error) {
	vocab := map[string]int{}
	for i, c := range byteChars() {
		vocab[c] = i
	}
	var ms []string
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
		ms = append(ms, m[0]+" "+m[1])
	}
	var added []map[string]any
	for _, s := range []string{PAD, TurnStart, EOS} {
		added = append(added, map[string]any{"id": len(vocab), "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
		vocab[s] = len(vocab)
	}
	level := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true}
	tok := map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": level, "post_processor": level, "decoder": level,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": ms}}
	cfg := map[string]any{"bos_token": nil, "eos_token": EOS, "pad_token": PAD, "add_bos_token": false, "chat_template": ChatTemplate}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	for name, v := range map[string]any{"tokenizer.json": tok, "tokenizer_config.json": cfg} {
		b, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return 0, fmt.Errorf("tokentest: %w", err)
		}
	}
	return len(vocab), nil
}
