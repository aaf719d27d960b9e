// Package tokenizer turns text into token ids and back for the policy model.
//
// It provides the Tokenizer interface (the seam where a BPE tokenizer.json
// implementation goes later) and Char, the built-in character-level
// tokenizer used by the built-in tasks: one token per printable ASCII
// character, plus PAD, BOS and EOS.
//
// Built-in id table (stable; checkpoints depend on it):
//
//	0        PAD  "<pad>"
//	1        BOS  "<bos>"
//	2        EOS  "<eos>"
//	3 + (c - 0x20)  printable ASCII c in 0x20 (space) .. 0x7E (~)
//	                e.g. ' ' = 3, '0' = 19, '9' = 28, '+' = 14, '=' = 32, 'a' = 68
//
// so the vocabulary has 98 entries.
//
// Invariants: Encode never emits PAD, BOS or EOS (callers add them);
// Decode(Encode(s)) == s for every printable-ASCII s.
//
// It imports only the standard library; it never imports the model, actors
// or messages.
//
// Example:
//
//	tok := tokenizer.NewChar()
//	ids, err := tok.Encode("12+34=")
//	text := tok.Decode(ids) // "12+34="
package tokenizer
