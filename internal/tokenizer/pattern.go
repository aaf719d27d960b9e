package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// pattern finds the non-overlapping matches of a tokenizer.json pattern
// ({"String": s} or {"Regex": r}) in a string.
type pattern struct {
	literal string
	fast    *fastRegex      // the regex run by Go's regexp, when it translates
	re      *regexp2.Regexp // else the regex run by regexp2; nil for a literal
}

// patternJSON is a pattern as tokenizer.json writes it.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// newPattern compiles a pattern. Regexes use Oniguruma's syntax in
// Hugging Face's tokenizers; regexp2 (.NET syntax) reads the constructs
// tokenizer files use (classes with \p{..}, (?i:..), (?!..), {m,n}) with
// the same meaning, \s included (Unicode White_Space in both).
func newPattern(raw json.RawMessage, where string) (pattern, error) {
	var p patternJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return pattern{}, fmt.Errorf("%s.pattern = %s: %v", where, raw, err)
	}
	switch {
	case p.String != nil:
		if *p.String == "" {
			return pattern{}, fmt.Errorf("%s.pattern: empty string", where)
		}
		return pattern{literal: *p.String}, nil
	case p.Regex != nil:
		if f, ok := translateRegex(*p.Regex); ok {
			return pattern{fast: f}, nil
		}
		re, err := regexp2.Compile(*p.Regex, regexp2.None)
		if err != nil {
			return pattern{}, fmt.Errorf("%s.pattern regex %q: %v", where, *p.Regex, err)
		}
		return pattern{re: re}, nil
	}
	return pattern{}, fmt.Errorf("%s.pattern = %s: want {\"String\": ...} or {\"Regex\": ...}", where, raw)
}

// find returns the byte spans of the matches of p in s, left to right;
// empty matches are left out.
func (p pattern) find(s string) [][2]int {
	var out [][2]int
	if p.fast != nil {
		return p.fast.find(s)
	}
	if p.re == nil {
		for i := 0; ; {
			j := strings.Index(s[i:], p.literal)
			if j < 0 {
				return out
			}
			out = append(out, [2]int{i + j, i + j + len(p.literal)})
			i += j + len(p.literal)
		}
	}
	runes := []rune(s)
	// byteAt[k] is the byte offset of rune k.
	byteAt := make([]int, len(runes)+1)
	off := 0
	for k, r := range runes {
		byteAt[k] = off
		off += utf8.RuneLen(r)
	}
	byteAt[len(runes)] = off
	m, err := p.re.FindRunesMatch(runes)
	for err == nil && m != nil {
		if m.Length > 0 {
			out = append(out, [2]int{byteAt[m.Index], byteAt[m.Index+m.Length]})
		}
		m, err = p.re.FindNextMatch(m)
	}
	return out
}

// replaceAll replaces every match of p in s by with.
func (p pattern) replaceAll(s, with string) string {
	if p.re == nil && p.fast == nil {
		return strings.ReplaceAll(s, p.literal, with)
	}
	var b strings.Builder
	last := 0
	for _, m := range p.find(s) {
		b.WriteString(s[last:m[0]])
		b.WriteString(with)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
