package chat

import (
	"fmt"
	"strings"
)

// Node kinds of a parsed template.
type tokKind int

const (
	tokText tokKind = iota
	tokExpr         // {{ ... }}
	tokStmt         // {% ... %}
)

// segment is a piece of template source: literal text or the inside of a
// tag.
type segment struct {
	kind tokKind
	text string
	pos  int // byte offset in the template, for errors
}

// split cuts a template into text and tags, applying whitespace control
// ({%- -%}, {{- -}}) and Jinja's trim_blocks and lstrip_blocks, which
// transformers turns on for chat templates. Comments are dropped.
func split(src string) ([]segment, error) {
	var out []segment
	i := 0
	trimNext := false // a "-" or a block's trim_blocks asks to trim the next text
	trimNewline := false
	for i < len(src) {
		j := indexTag(src, i)
		text := src[i:]
		if j >= 0 {
			text = src[i:j]
		}
		raw := text
		if trimNext {
			text = strings.TrimLeft(text, " \t\r\n")
		} else if trimNewline {
			text = strings.TrimPrefix(text, "\n")
		}
		trimNext, trimNewline = false, false
		if j < 0 {
			out = appendText(out, text, i)
			break
		}
		open := src[j : j+2]
		closeTag := map[string]string{"{{": "}}", "{%": "%}", "{#": "#}"}[open]
		end := strings.Index(src[j+2:], closeTag)
		if end < 0 {
			return nil, fmt.Errorf("offset %d: %s without %s", j, open, closeTag)
		}
		end += j + 2
		inner := src[j+2 : end]
		stripLeft := strings.HasPrefix(inner, "-")
		if stripLeft {
			inner = inner[1:]
		}
		stripRight := strings.HasSuffix(inner, "-")
		if stripRight {
			inner = inner[:len(inner)-1]
		}
		switch {
		case stripLeft:
			text = strings.TrimRight(text, " \t\r\n")
		case open != "{{" && !strings.HasPrefix(inner, "+"):
			if atLineStart(raw, i == 0) {
				text = strings.TrimRight(text, " \t")
			}
		}
		out = appendText(out, text, i)
		switch open {
		case "{{":
			out = append(out, segment{tokExpr, strings.TrimSpace(inner), j})
		case "{%":
			out = append(out, segment{tokStmt, strings.TrimSpace(strings.TrimPrefix(inner, "+")), j})
		}
		trimNext = stripRight
		trimNewline = open != "{{" // trim_blocks
		i = end + 2
	}
	return out, nil
}

// indexTag is the offset of the next {{, {% or {# at or after i, -1 if none.
func indexTag(s string, i int) int {
	for k := i; k+1 < len(s); k++ {
		if s[k] == '{' && (s[k+1] == '{' || s[k+1] == '%' || s[k+1] == '#') {
			return k
		}
	}
	return -1
}

// atLineStart reports whether a tag that follows raw (the source text
// since the previous tag) has only spaces and tabs before it on its line,
// so that lstrip_blocks removes them.
func atLineStart(raw string, templateStart bool) bool {
	k := len(raw)
	for k > 0 && (raw[k-1] == ' ' || raw[k-1] == '\t') {
		k--
	}
	if k == 0 {
		return templateStart
	}
	return raw[k-1] == '\n'
}

func appendText(out []segment, text string, pos int) []segment {
	if text == "" {
		return out
	}
	return append(out, segment{tokText, text, pos})
}
