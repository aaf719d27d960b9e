package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoder turns a chain of token strings into text pieces (Hugging Face's
// decode_chain); the text is their concatenation.
type decoder func([]string) []string

// newDecoder builds the "decoder" of a tokenizer.json (nil for null: the
// tokens are joined with spaces).
func newDecoder(raw json.RawMessage, where string) (decoder, error) {
	return newComponent(raw, where, func(c componentJSON) ([]json.RawMessage, string) { return c.Decoders, "decoders" }, buildDecoder)
}

// buildDecoder builds one decoder other than a Sequence.
func buildDecoder(c componentJSON, where string) (decoder, error) {
	switch c.Type {
	case "ByteLevel":
		return decodeByteLevel, nil
	case "ByteFallback":
		return decodeByteFallback, nil
	case "Fuse":
		return func(toks []string) []string { return []string{strings.Join(toks, "")} }, nil
	case "Replace":
		pat, err := newPattern(c.Pattern, where)
		if err != nil {
			return nil, err
		}
		with := c.Content
		return func(toks []string) []string {
			for i, t := range toks {
				toks[i] = pat.replaceAll(t, with)
			}
			return toks
		}, nil
	case "Strip":
		return newStripDecoder(c, where)
	case "Metaspace":
		return newMetaspaceDecoder(c, where)
	}
	return nil, fmt.Errorf("%s.type %q: decoder %w (supported: Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace)", where, c.Type, ErrNotSupported)
}

// decodeByteLevel maps byte-level runes back to bytes (a token with a rune
// outside the table keeps its own bytes) and reads them as UTF-8, ill-formed
// sequences becoming U+FFFD.
func decodeByteLevel(toks []string) []string {
	var buf []byte
	for _, t := range toks {
		start := len(buf)
		ok := true
		for _, r := range t {
			b, in := runeBytes[r]
			if !in {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:start], t...)
		}
	}
	return []string{lossyString(buf)}
}

// decodeByteFallback turns runs of <0xXX> tokens into their text: the
// bytes as UTF-8 when well formed, else one U+FFFD per byte.
func decodeByteFallback(toks []string) []string {
	out := make([]string, 0, len(toks))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range toks {
		if len(t) == 6 && strings.HasPrefix(t, "<0x") && t[5] == '>' {
			if v, err := strconv.ParseUint(t[3:5], 16, 8); err == nil {
				pending = append(pending, byte(v))
				continue
			}
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// newStripDecoder removes up to start leading and stop trailing copies of
// content from every token.
func newStripDecoder(c componentJSON, where string) (decoder, error) {
	rs := []rune(c.Content)
	if len(rs) != 1 || c.Start < 0 || c.Stop < 0 {
		return nil, fmt.Errorf("%s: Strip wants one content character and non-negative start and stop", where)
	}
	ch, start, stop := rs[0], c.Start, c.Stop
	return func(toks []string) []string {
		for i, t := range toks {
			r := []rune(t)
			lo := 0
			for lo < len(r) && lo < start && r[lo] == ch {
				lo++
			}
			hi := len(r)
			for n := 0; n < stop && hi > lo && r[hi-1] == ch; n++ {
				hi--
			}
			toks[i] = string(r[lo:hi])
		}
		return toks
	}, nil
}

// newMetaspaceDecoder turns the replacement back into spaces; in the first
// token it is dropped instead, unless prepend_scheme is never.
func newMetaspaceDecoder(c componentJSON, where string) (decoder, error) {
	rs := []rune(c.Replacement)
	if len(rs) != 1 {
		return nil, fmt.Errorf("%s.replacement %q: want one character", where, c.Replacement)
	}
	rep := rs[0]
	drop := c.PrependScheme != "never"
	if c.PrependScheme == "" && c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		drop = false
	}
	return func(toks []string) []string {
		for i, t := range toks {
			var b strings.Builder
			for _, r := range t {
				switch {
				case r != rep:
					b.WriteRune(r)
				case i == 0 && drop:
				default:
					b.WriteByte(' ')
				}
			}
			toks[i] = b.String()
		}
		return toks
	}, nil
}
