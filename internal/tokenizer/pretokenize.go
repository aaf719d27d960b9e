package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// piece is one part of the input on its way to the model: a word after
// pre-tokenization. first marks the piece that starts at offset 0 of the
// original input (Metaspace's prepend_scheme "first" looks at it).
type piece struct {
	text  string
	first bool
}

// preTokenizer splits pieces into smaller ones (and may rewrite them).
type preTokenizer func([]piece) []piece

// gpt2Pattern is the split GPT-2's ByteLevel pre-tokenizer applies with
// use_regex.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// newPreTokenizer builds the "pre_tokenizer" of a tokenizer.json (nil for
// null).
func newPreTokenizer(raw json.RawMessage, where string) (preTokenizer, error) {
	return newComponent(raw, where, func(c componentJSON) ([]json.RawMessage, string) { return c.PreTokenizers, "pretokenizers" }, buildPreTokenizer)
}

// buildPreTokenizer builds one pre-tokenizer other than a Sequence.
func buildPreTokenizer(c componentJSON, where string) (preTokenizer, error) {
	switch c.Type {
	case "Split":
		pat, err := newPattern(c.Pattern, where)
		if err != nil {
			return nil, err
		}
		b, err := parseBehavior(c.Behavior, where)
		if err != nil {
			return nil, err
		}
		return splitter(pat.find, b, c.Invert), nil
	case "ByteLevel":
		return newByteLevel(c, where)
	case "Digits":
		isDigit := func(s string) [][2]int { return runsOf(s, unicode.IsNumber, true) }
		b := contiguous
		if c.IndividualDigits {
			b = isolated
		}
		return splitter(isDigit, b, false), nil
	case "Metaspace":
		return newMetaspace(c, where)
	}
	return nil, fmt.Errorf("%s.type %q: pre-tokenizer %w (supported: Sequence, Split, ByteLevel, Digits, Metaspace)", where, c.Type, ErrNotSupported)
}

// newByteLevel is GPT-2's pre-tokenizer: an optional leading space, the
// GPT-2 split (use_regex), then every byte as its byte-level rune.
func newByteLevel(c componentJSON, where string) (preTokenizer, error) {
	addPrefix := c.AddPrefixSpace == nil || *c.AddPrefixSpace
	useRegex := c.UseRegex == nil || *c.UseRegex
	var split preTokenizer
	if useRegex {
		pat, err := newPattern(json.RawMessage(`{"Regex":`+quoteJSON(gpt2Pattern)+`}`), where)
		if err != nil {
			return nil, err
		}
		split = splitter(pat.find, isolated, false)
	}
	return func(ps []piece) []piece {
		if addPrefix {
			for i := range ps {
				if !strings.HasPrefix(ps[i].text, " ") {
					ps[i].text = " " + ps[i].text
				}
			}
		}
		if split != nil {
			ps = split(ps)
		}
		for i := range ps {
			ps[i].text = byteLevelEncode(ps[i].text)
		}
		return ps
	}, nil
}

// newMetaspace is SentencePiece's treatment of spaces: every space becomes
// the replacement (▁), one is prepended (always, or only to the start of
// the input with prepend_scheme "first"), and with split the text is cut
// before each replacement.
func newMetaspace(c componentJSON, where string) (preTokenizer, error) {
	rep := c.Replacement
	if utf8.RuneCountInString(rep) != 1 {
		return nil, fmt.Errorf("%s.replacement %q: want one character", where, rep)
	}
	scheme := c.PrependScheme
	if scheme == "" {
		scheme = "always"
		if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			scheme = "never"
		}
	}
	if scheme != "always" && scheme != "first" && scheme != "never" {
		return nil, fmt.Errorf("%s.prepend_scheme %q: want always, first or never", where, scheme)
	}
	doSplit := c.SplitOn == nil || *c.SplitOn
	find := func(s string) [][2]int {
		return pattern{literal: rep}.find(s)
	}
	cut := splitter(find, mergedWithNext, false)
	return func(ps []piece) []piece {
		for i := range ps {
			t := strings.ReplaceAll(ps[i].text, " ", rep)
			if !strings.HasPrefix(t, rep) && (scheme == "always" || scheme == "first" && ps[i].first) {
				t = rep + t
			}
			ps[i].text = t
		}
		if doSplit {
			ps = cut(ps)
		}
		return ps
	}, nil
}

// behavior says what a split does with the matched delimiters.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s, where string) (behavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("%s.behavior %q: want Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", where, s)
}

// splitter cuts every piece at the spans find returns, handling the
// spans (or, with invert, the text between them) as b says.
func splitter(find func(string) [][2]int, b behavior, invert bool) preTokenizer {
	return func(ps []piece) []piece {
		out := make([]piece, 0, len(ps))
		for _, p := range ps {
			out = appendSplit(out, p, find(p.text), b, invert)
		}
		return out
	}
}

// segment is a span of a piece and whether it is a delimiter.
type segment struct {
	lo, hi int
	delim  bool
}

// appendSplit appends the parts of p cut at matches to out.
func appendSplit(out []piece, p piece, matches [][2]int, b behavior, invert bool) []piece {
	s := p.text
	segs := make([]segment, 0, 2*len(matches)+1)
	prev := 0
	for _, m := range matches {
		if m[0] > prev {
			segs = append(segs, segment{prev, m[0], invert})
		}
		segs = append(segs, segment{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev < len(s) {
		segs = append(segs, segment{prev, len(s), invert})
	}
	spans := applyBehavior(segs, b)
	for _, sp := range spans {
		if sp[1] > sp[0] {
			out = append(out, piece{text: s[sp[0]:sp[1]], first: p.first && sp[0] == 0})
		}
	}
	return out
}

// runsOf returns the spans of characters with property is: each character
// alone when single, else maximal runs.
func runsOf(s string, is func(rune) bool, single bool) [][2]int {
	var out [][2]int
	for i, r := range s {
		if !is(r) {
			continue
		}
		end := i + utf8.RuneLen(r)
		if !single && len(out) > 0 && out[len(out)-1][1] == i {
			out[len(out)-1][1] = end
			continue
		}
		out = append(out, [2]int{i, end})
	}
	return out
}

// quoteJSON is s as a JSON string literal.
func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// applyBehavior turns segments into the spans of the resulting pieces, as
// Hugging Face's split does: a delimiter merges into its neighbour only
// when that neighbour is not itself a delimiter.
func applyBehavior(segs []segment, b behavior) [][2]int {
	spans := make([][2]int, 0, len(segs))
	prevDelim := false
	switch b {
	case removed:
		for _, g := range segs {
			if !g.delim {
				spans = append(spans, [2]int{g.lo, g.hi})
			}
		}
	case isolated:
		for _, g := range segs {
			spans = append(spans, [2]int{g.lo, g.hi})
		}
	case mergedWithPrevious:
		for _, g := range segs {
			if g.delim && !prevDelim && len(spans) > 0 {
				spans[len(spans)-1][1] = g.hi
			} else {
				spans = append(spans, [2]int{g.lo, g.hi})
			}
			prevDelim = g.delim
		}
	case mergedWithNext:
		for i := len(segs) - 1; i >= 0; i-- {
			g := segs[i]
			if g.delim && !prevDelim && len(spans) > 0 {
				spans[len(spans)-1][0] = g.lo
			} else {
				spans = append(spans, [2]int{g.lo, g.hi})
			}
			prevDelim = g.delim
		}
		slices.Reverse(spans)
	case contiguous:
		for _, g := range segs {
			if g.delim == prevDelim && len(spans) > 0 {
				spans[len(spans)-1][1] = g.hi
			} else {
				spans = append(spans, [2]int{g.lo, g.hi})
			}
			prevDelim = g.delim
		}
	}
	return spans
}
