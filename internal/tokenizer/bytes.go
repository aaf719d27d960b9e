package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// byteRunes maps each byte to the printable rune that stands for it in a
// byte-level BPE vocabulary (GPT-2's table: the printable Latin-1 bytes
// stand for themselves, the other 68 bytes are shifted to U+0100..U+0143
// in byte order), and runeBytes is its inverse.
var byteRunes, runeBytes = byteLevelTables()

func byteLevelTables() ([256]rune, map[rune]byte) {
	var fwd [256]rune
	inv := make(map[rune]byte, 256)
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !printable(b) {
			r = next
			next++
		}
		fwd[b] = r
		inv[r] = byte(b)
	}
	return fwd, inv
}

// byteLevelEncode writes every byte of s as its byte-level rune.
func byteLevelEncode(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteRunes[s[i]])
	}
	return b.String()
}

// validUTF8 returns s with every ill-formed UTF-8 sequence replaced by
// U+FFFD, one replacement per maximal subpart (Unicode §3.9, the rule of
// the WHATWG decoder and of Rust's String::from_utf8_lossy), so that the
// text is exactly what Hugging Face's tokenizers receives when the same
// bytes are decoded by a JavaScript or Rust caller. Go's own range loop
// replaces each bad byte instead, which differs for truncated sequences.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += maximalSubpart(s[i:])
	}
	return b.String()
}

// maximalSubpart is the length of the longest prefix of s (which starts
// an ill-formed sequence) that could begin a well-formed UTF-8 sequence,
// at least 1.
func maximalSubpart(s string) int {
	lo, hi, need := byte(0x80), byte(0xBF), 0
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		lo, need = 0xA0, 2
	case c == 0xED:
		hi, need = 0x9F, 2
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		lo, need = 0x90, 3
	case c == 0xF4:
		hi, need = 0x8F, 3
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(s); n++ {
		if s[n] < lo || s[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// lossyString is String::from_utf8_lossy of b.
func lossyString(b []byte) string { return validUTF8(string(b)) }
