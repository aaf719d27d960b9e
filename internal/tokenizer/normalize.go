package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before it is split into words.
type normalizer func(string) string

// componentJSON holds the keys of every normalizer, pre-tokenizer,
// decoder and post-processor that this package implements.
type componentJSON struct {
	Type string `json:"type"`
	// Sequence members, by component kind.
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	// Prepend, Replace, Strip, Metaspace.
	Prepend string          `json:"prepend"`
	Pattern json.RawMessage `json:"pattern"`
	Content string          `json:"content"`
	Start   int             `json:"start"`
	Stop    int             `json:"stop"`
	// Split.
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	// ByteLevel.
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Digits.
	IndividualDigits bool `json:"individual_digits"`
	// Metaspace.
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	SplitOn       *bool  `json:"split"`
	// TemplateProcessing.
	Single        []json.RawMessage          `json:"single"`
	SpecialTokens map[string]templateSpecial `json:"special_tokens"`
}

// decodeComponent reads one component object, naming where it is on error.
func decodeComponent(raw json.RawMessage, where string) (componentJSON, error) {
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("%s = %.80s: %v", where, raw, err)
	}
	return c, nil
}

// isNull reports whether a JSON value is absent or null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// chain builds each member of a Sequence component with build and returns
// them as one step: each member's output is the next one's input (null
// members are left out). where names the member list.
func chain[F ~func(T) T, T any](members []json.RawMessage, where string, build func(json.RawMessage, string) (F, error)) (F, error) {
	var steps []F
	for i, r := range members {
		s, err := build(r, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		if s != nil {
			steps = append(steps, s)
		}
	}
	return func(x T) T {
		for _, s := range steps {
			x = s(x)
		}
		return x
	}, nil
}

// newComponent builds the component of a tokenizer.json at where: nil for
// null, the chain of its members for a Sequence (members returns them and
// the key that holds them), and build's function for any other type. The
// normalizer, pre-tokenizer and decoder are each one of these.
func newComponent[F ~func(T) T, T any](raw json.RawMessage, where string,
	members func(componentJSON) ([]json.RawMessage, string), build func(componentJSON, string) (F, error)) (F, error) {
	if isNull(raw) {
		return nil, nil
	}
	c, err := decodeComponent(raw, where)
	if err != nil {
		return nil, err
	}
	if c.Type != "Sequence" {
		return build(c, where)
	}
	list, key := members(c)
	return chain(list, where+"."+key, func(r json.RawMessage, w string) (F, error) { return newComponent(r, w, members, build) })
}

// newNormalizer builds the "normalizer" of a tokenizer.json (nil for null).
func newNormalizer(raw json.RawMessage, where string) (normalizer, error) {
	return newComponent(raw, where, func(c componentJSON) ([]json.RawMessage, string) { return c.Normalizers, "normalizers" }, buildNormalizer)
}

// buildNormalizer builds one normalizer other than a Sequence. The
// Unicode forms follow the plain UAX #15 algorithm, as the library does
// (normalize).
func buildNormalizer(c componentJSON, where string) (normalizer, error) {
	switch c.Type {
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		pat, err := newPattern(c.Pattern, where)
		if err != nil {
			return nil, err
		}
		with := c.Content
		return func(s string) string { return pat.replaceAll(s, with) }, nil
	case "NFC":
		return normalize(norm.NFC), nil
	case "NFD":
		return normalize(norm.NFD), nil
	case "NFKC":
		return normalize(norm.NFKC), nil
	case "NFKD":
		return normalize(norm.NFKD), nil
	case "Lowercase":
		return strings.ToLower, nil
	}
	return nil, fmt.Errorf("%s.type %q: normalizer %w (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase)", where, c.Type, ErrNotSupported)
}
