package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// cgj is U+034F COMBINING GRAPHEME JOINER, which golang.org/x/text's
// normalizer inserts after 30 non-starters in a row (the Stream-Safe Text
// Format, UAX #15 §13).
const cgj = "\u034f"

// normalize returns a function applying the Unicode normalization form f
// as Hugging Face's tokenizers does (the unicode-normalization crate): the
// plain UAX #15 algorithm, without the Stream-Safe Text Format. The fast
// path is golang.org/x/text's normalizer; only where it inserted a U+034F
// (a run of more than 30 combining marks, never in ordinary text) is the
// text normalized again by normalizeSlow.
func normalize(f norm.Form) func(string) string {
	return func(s string) string {
		out := f.String(s)
		if !strings.Contains(out, cgj) || strings.Count(out, cgj) == strings.Count(s, cgj) {
			return out
		}
		return normalizeSlow(f, s)
	}
}

// normalizeSlow is UAX #15 written out: decompose every rune (canonically
// for NFC and NFD, by compatibility for NFKC and NFKD), sort each run of
// non-starters stably by combining class, then, for NFC and NFKC, compose
// canonically. Each rune's decomposition and each pair's composition come
// from golang.org/x/text on one or two runes, well within its limit.
func normalizeSlow(f norm.Form, s string) string {
	decompose, compose := norm.NFD, false
	switch f {
	case norm.NFKC, norm.NFKD:
		decompose = norm.NFKD
	}
	if f == norm.NFC || f == norm.NFKC {
		compose = true
	}
	var rs []rune
	for _, r := range s {
		rs = append(rs, []rune(decompose.String(string(r)))...)
	}
	sortMarks(rs)
	if compose {
		rs = composeRunes(rs)
	}
	return string(rs)
}

// ccc is the canonical combining class of r (0 for a starter).
func ccc(r rune) uint8 {
	var buf [utf8.UTFMax]byte
	return norm.NFD.Properties(buf[:utf8.EncodeRune(buf[:], r)]).CCC()
}

// sortMarks puts every run of non-starters of rs in canonical order: a
// stable sort by combining class (UAX #15 canonical ordering).
func sortMarks(rs []rune) {
	for i := 0; i < len(rs); {
		if ccc(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		slices.SortStableFunc(rs[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
		i = j
	}
}

// composeRunes is the canonical composition algorithm of UAX #15 on a
// decomposed, canonically ordered sequence: each character that is not
// blocked from the last starter and forms a primary composite with it is
// merged into it.
func composeRunes(rs []rune) []rune {
	if len(rs) == 0 {
		return rs
	}
	out := []rune{rs[0]}
	starter, last := 0, uint8(0) // index in out of the last starter; class of the last character kept
	if ccc(rs[0]) != 0 {
		starter, last = -1, 255
	}
	for _, r := range rs[1:] {
		class := ccc(r)
		if starter >= 0 && (last < class || last == 0) {
			if c, ok := primaryComposite(out[starter], r); ok {
				out[starter] = c
				continue
			}
		}
		if class == 0 {
			starter = len(out)
		}
		last = class
		out = append(out, r)
	}
	return out
}

// primaryComposite is the character that a and b compose to, if any: the
// NFC of the pair when it is one character whose canonical decomposition
// is a's followed by b (a composition exclusion is not composed by NFC).
func primaryComposite(a, b rune) (rune, bool) {
	c := []rune(norm.NFC.String(string([]rune{a, b})))
	if len(c) != 1 || norm.NFD.String(string(c)) != norm.NFD.String(string(a))+string(b) {
		return 0, false
	}
	return c[0], true
}
