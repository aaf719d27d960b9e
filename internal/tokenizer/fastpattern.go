package tokenizer

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// A split regex of a tokenizer file is run by Go's regexp (RE2, several
// times faster than regexp2 here) when it can be translated exactly:
// Oniguruma's Unicode \s and \S become explicit classes, and the one
// lookahead these files use, a final `\s+(?!\S)|\s+`, becomes `\s+`
// followed by a fix-up of its matches (see find). Anything else a
// translation cannot carry over exactly (\d, \w, \b, other lookarounds,
// \S inside a class, ...) leaves the pattern to regexp2.

// unicodeSpace is Oniguruma's \s in a Unicode encoding: U+0009..U+000D,
// U+0085 and the separators (Zs, Zl, Zp).
const unicodeSpace = `\t\n\v\f\r\x{85}\p{Z}`

// wsGroup names the alternative that stands for `\s+(?!\S)`.
const wsGroup = "mgrpows"

// fastRegex is a translated pattern.
type fastRegex struct {
	re *regexp.Regexp
	ws int // submatch index of wsGroup, -1 when the pattern has no lookahead
}

// translateRegex returns the RE2 form of an Oniguruma split pattern, or
// false when it cannot be carried over exactly.
func translateRegex(pat string) (*fastRegex, bool) {
	alts, ok := topLevelAlternatives(pat)
	if !ok {
		return nil, false
	}
	var b strings.Builder
	lookahead := false
	for i, alt := range alts {
		if i > 0 {
			b.WriteByte('|')
		}
		if alt == `\s+(?!\S)` {
			// Only as the next-to-last alternative, before a plain \s+.
			if i != len(alts)-2 || alts[len(alts)-1] != `\s+` {
				return nil, false
			}
			b.WriteString("(?P<" + wsGroup + ">[" + unicodeSpace + "]+)")
			lookahead = true
			continue
		}
		t, ok := translateAlternative(alt)
		if !ok {
			return nil, false
		}
		b.WriteString("(?:" + t + ")")
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, false
	}
	f := &fastRegex{re: re, ws: -1}
	if lookahead {
		f.ws = re.SubexpIndex(wsGroup)
	}
	return f, true
}

// topLevelAlternatives splits a pattern at the | outside groups and
// classes.
func topLevelAlternatives(pat string) ([]string, bool) {
	var alts []string
	depth, inClass, start := 0, false, 0
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(pat) && pat[i+1] == '^' {
				i++
			}
			if i+1 < len(pat) && pat[i+1] == ']' {
				i++ // a leading ] is a literal
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			alts = append(alts, pat[start:i])
			start = i + 1
		}
	}
	if depth != 0 || inClass {
		return nil, false
	}
	return append(alts, pat[start:]), true
}

// translateAlternative rewrites the escapes of one alternative whose
// meaning differs between Oniguruma and RE2.
func translateAlternative(alt string) (string, bool) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(alt); i++ {
		c := alt[i]
		switch {
		case c == '\\' && i+1 < len(alt):
			n, ok := translateEscape(&b, alt, i+1, inClass)
			if !ok {
				return "", false
			}
			i += n
		case c == '(' && i+2 < len(alt) && alt[i+1] == '?' && (alt[i+2] == '=' || alt[i+2] == '!' || alt[i+2] == '<' || alt[i+2] == '>'):
			return "", false // lookaround, atomic group
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(alt) && alt[i+1] == '^' {
				i++
				b.WriteByte('^')
			}
			if i+1 < len(alt) && alt[i+1] == ']' {
				i++
				b.WriteString(`\]`)
			}
		case c == '*' || c == '+' || c == '?' || c == '}':
			if i+1 < len(alt) && alt[i+1] == '+' {
				return "", false // possessive quantifier
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), !inClass
}

// translateEscape writes the RE2 form of the escape whose letter is
// alt[i] (after a backslash) and returns how many bytes of alt it read;
// ok is false for one whose meaning differs or that is not needed.
func translateEscape(b *strings.Builder, alt string, i int, inClass bool) (n int, ok bool) {
	switch e := alt[i]; e {
	case 's':
		if inClass {
			b.WriteString(unicodeSpace)
		} else {
			b.WriteString("[" + unicodeSpace + "]")
		}
	case 'S':
		if inClass {
			return 0, false
		}
		b.WriteString("[^" + unicodeSpace + "]")
	case 'p', 'P':
		end := strings.IndexByte(alt[i:], '}')
		if i+1 >= len(alt) || alt[i+1] != '{' || end < 0 {
			return 0, false
		}
		b.WriteByte('\\')
		b.WriteString(alt[i : i+end+1])
		return 1 + end, true
	case 'r', 'n', 't', 'f', 'v', '\\', '.', '-', '[', ']', '(', ')', '{', '}', '*', '+', '?', '|', '^', '$', '/', '\'', '"', '!', '#', '%', '&', ',', ':', ';', '<', '=', '>', '@', '_', '`', '~':
		b.WriteByte('\\')
		b.WriteByte(e)
	default:
		return 0, false // \d, \w, \b, \u, \x, ... differ or are not needed
	}
	return 1, true
}

// find returns the byte spans of the matches, as Oniguruma finds them
// with the original pattern: a match of the \s+(?!\S) alternative that is
// followed by more text gives back its last character (which then starts
// the next match), unless it is a single character, which the final \s+
// alternative matches alike.
func (f *fastRegex) find(s string) [][2]int {
	var out [][2]int
	for p := 0; p < len(s); {
		loc := f.re.FindStringSubmatchIndex(s[p:])
		if loc == nil {
			break
		}
		lo, hi := p+loc[0], p+loc[1]
		if f.ws >= 0 && loc[2*f.ws] >= 0 && hi < len(s) {
			_, last := utf8.DecodeLastRuneInString(s[lo:hi])
			if hi-last > lo {
				hi -= last
			}
		}
		if hi == lo { // an empty match: step over one character
			_, n := utf8.DecodeRuneInString(s[hi:])
			p = hi + max(n, 1)
			continue
		}
		out = append(out, [2]int{lo, hi})
		p = hi
	}
	return out
}
