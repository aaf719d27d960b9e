package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of "added_tokens" in tokenizer.json.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// matcher finds added tokens in text, leftmost-longest as Hugging Face's
// tokenizers does (Aho-Corasick, LeftmostLongest), with the tokens'
// single_word, lstrip and rstrip rules.
type matcher struct {
	byFirst map[byte][]matchEntry // candidates by first byte, longest first
}

type matchEntry struct {
	pattern string
	tok     *addedToken
}

func newMatcher(entries []matchEntry) *matcher {
	m := &matcher{byFirst: map[byte][]matchEntry{}}
	for _, e := range entries {
		if e.pattern == "" {
			continue
		}
		m.byFirst[e.pattern[0]] = append(m.byFirst[e.pattern[0]], e)
	}
	for _, list := range m.byFirst {
		// Longest first, so the first hit at a position is the longest.
		for i := 1; i < len(list); i++ {
			for j := i; j > 0 && len(list[j].pattern) > len(list[j-1].pattern); j-- {
				list[j], list[j-1] = list[j-1], list[j]
			}
		}
	}
	return m
}

// span is a part of a text: an added token (tok != nil) or text between.
type span struct {
	lo, hi int
	tok    *addedToken
}

// split cuts s into added tokens and the text around them.
func (m *matcher) split(s string) []span {
	if len(m.byFirst) == 0 {
		return []span{{0, len(s), nil}}
	}
	var out []span
	start := 0 // end of the last added token
	for i := 0; i < len(s); {
		e, ok := m.longestAt(s, i)
		if !ok {
			i++
			continue
		}
		lo, hi := i, i+len(e.pattern)
		if e.tok.SingleWord && !(lo == 0 || !endsWithWordChar(s[:lo])) || e.tok.SingleWord && !(hi == len(s) || !startsWithWordChar(s[hi:])) {
			i = hi // the match is consumed but not used, as with Aho-Corasick
			continue
		}
		if e.tok.LStrip {
			lo = max(len(strings.TrimRightFunc(s[:lo], unicode.IsSpace)), start)
		}
		if e.tok.RStrip {
			hi = len(s) - len(strings.TrimLeftFunc(s[hi:], unicode.IsSpace))
		}
		if lo > start {
			out = append(out, span{start, lo, nil})
		}
		out = append(out, span{lo, hi, e.tok})
		start, i = hi, hi
	}
	if start < len(s) {
		out = append(out, span{start, len(s), nil})
	}
	return out
}

// longestAt returns the longest added token starting at byte i of s.
func (m *matcher) longestAt(s string, i int) (matchEntry, bool) {
	for _, e := range m.byFirst[s[i]] {
		if strings.HasPrefix(s[i:], e.pattern) {
			return e, true
		}
	}
	return matchEntry{}, false
}

func endsWithWordChar(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordChar(r)
}

// isWordChar is Rust regex's \w: alphanumeric, marks, connector
// punctuation.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r) || unicode.Is(unicode.Pc, r) || unicode.IsNumber(r)
}
