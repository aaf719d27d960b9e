// Package tokenizer turns text into token ids and back for the policy model.
//
// It provides the Tokenizer interface, Char (the built-in character-level
// tokenizer of the built-in tasks) and HF (a Hugging Face tokenizer.json
// with a BPE model, as Llama-family checkpoints ship). Load picks the one a
// checkpoint directory holds.
//
// # Char
//
// One token per printable ASCII character, plus PAD, BOS and EOS.
// Built-in id table (stable; checkpoints depend on it):
//
//	0        PAD  "<｜pad｜>"
//	1        BOS  "<｜bos｜>"
//	2        EOS  "<｜eos｜>"
//	3 + (c - 0x20)  printable ASCII c in 0x20 (space) .. 0x7E (~)
//	                e.g. ' ' = 3, '0' = 19, '9' = 28, '+' = 14, '=' = 32, 'a' = 68
//
// so the vocabulary has 98 entries. Encode never emits PAD, BOS or EOS
// (callers add them); Decode(Encode(s)) == s for every printable-ASCII s.
// Save writes a Hugging Face tokenizer.json (a BPE model without merges)
// that the library loads and encodes, with and without BOS, and decodes
// exactly as Char does (TestLongCharReference), and tokenizer_config.json.
//
// # HF
//
// HF reads tokenizer.json as Hugging Face's tokenizers does and gives the
// same ids and the same decoded text (TestLongReferenceTokenizers compares
// both on 10,000 generated texts with the library itself, through its Node
// binding, for the Llama 2, Llama 3, Qwen3, DeepSeek-V3 and GPT-4o files
// and variants of them). Implemented: a BPE model (merges as "a b" or
// pairs, byte_fallback, fuse_unk, unk_token, ignore_merges); normalizers
// Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD (plain UAX #15, as the
// library: no U+034F after 30 combining marks, which golang.org/x/text's
// Stream-Safe format inserts), Lowercase;
// pre-tokenizers Sequence, Split (String or Regex patterns, every
// behaviour, invert), ByteLevel, Digits, Metaspace; decoders Sequence,
// ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace; post-processors
// TemplateProcessing, ByteLevel, Sequence; added tokens with single_word,
// lstrip, rstrip and normalized, special ones matched in the text as the
// library does by default. Anything else in the file (a WordPiece or
// Unigram model, another normalizer, pre-tokenizer, decoder or
// post-processor, BPE dropout, truncation, padding) makes Load fail with
// one line naming it (ErrNotSupported), so no text is ever tokenised
// differently from the reference.
//
//   - Encode(s) is encode(s, add_special_tokens=False); EncodePrompt(s)
//     adds what the post-processor puts around one sequence (BOS for
//     Llama 2; nothing for a file without TemplateProcessing).
//   - Decode is decode(ids, skip_special_tokens=True).
//   - BOS, EOS and PAD come from tokenizer_config.json, then
//     special_tokens_map.json, then generation_config.json, then
//     config.json (the first file naming each); -1 where none names it. A
//     tokenizer without EOS is refused: generation could not stop.
//   - Ill-formed UTF-8 in the input becomes U+FFFD, one per maximal
//     subpart (what a JavaScript or Rust caller of the library would have
//     passed it).
//
// It imports no package of the model, actors or messages.
//
// Example:
//
//	tok, err := tokenizer.Load("SmolLM2-135M/")  // tokenizer.json and its config files
//	ids, err := tok.EncodePrompt("12+34=")        // with BOS where the model expects it
//	text := tok.Decode(ids)                      // "12+34="
package tokenizer
