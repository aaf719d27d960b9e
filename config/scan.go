package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
	"go.yaml.in/yaml/v3"
)

// The YAML and TOML decoders check a mapping's keys for duplicates by
// comparing each with every other: a file of two million keys took hours.
// Before decoding, scanYAML and scanTOML walk the file's syntax tree once
// and refuse the first key, in file order, that names nothing (and, in
// YAML, a key given twice in one mapping), so the decoders only ever see
// mappings of known keys.

// parseYAML decodes YAML text into nested maps after scanYAML has found
// every key known.
func parseYAML(t *keyTable, data []byte, value, source string) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, parseError(value, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return map[string]any{}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.MappingNode {
		s := yamlScan{t: t, source: source, seen: map[yamlVisit]bool{}}
		if err := s.mapping(root, ""); err != nil {
			return nil, err
		}
	}
	var out map[string]any
	if err := doc.Decode(&out); err != nil {
		return nil, parseError(value, err)
	}
	return out, nil
}

// parseError is the one line for a file that does not parse.
func parseError(value string, err error) *Error {
	return &Error{Key: "config", Value: value, Reason: "cannot parse: " + oneLine(err.Error()), Err: ErrSource}
}

// yamlVisit is a mapping walked as the keys under prefix: a mapping that
// aliases reach many times is walked once per prefix.
type yamlVisit struct {
	n      *yaml.Node
	prefix string
}

// yamlScan walks a YAML document's mappings against the key table.
type yamlScan struct {
	t      *keyTable
	source string
	seen   map[yamlVisit]bool
}

// mapping checks the keys of m, which holds the keys under prefix.
func (s *yamlScan) mapping(m *yaml.Node, prefix string) error {
	if s.seen[yamlVisit{m, prefix}] {
		return nil
	}
	s.seen[yamlVisit{m, prefix}] = true
	lines := make(map[string]int, min(len(m.Content)/2, 64))
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return s.t.unknown(prefix+"{...}", s.source)
		}
		key := prefix + k.Value
		if line, dup := lines[k.Value]; dup {
			return &Error{Key: key, Reason: fmt.Sprintf("is given twice (lines %d and %d)", line, k.Line), Source: s.source, Err: ErrSource}
		}
		lines[k.Value] = k.Line
		if err := s.entry(k.Value, key, v, prefix); err != nil {
			return err
		}
	}
	return nil
}

// entry checks one key of a mapping under prefix and its value.
func (s *yamlScan) entry(name, key string, v *yaml.Node, prefix string) error {
	switch {
	case name == "<<" && isMerge(v): // a merge: the aliased mappings' keys land here
		for _, m := range mergeTargets(v) {
			if err := s.mapping(m, prefix); err != nil {
				return err
			}
		}
	case s.t.sections[key]:
		if r := resolve(v); r.Kind == yaml.MappingNode {
			return s.mapping(r, key+".")
		} // a scalar section is refused by flatten, with its value
	case s.t.has(key):
		if holdsMapping(v) {
			l, _ := s.t.lookup(key)
			return l.mappingError(s.source)
		}
	case retired[key] && !holdsMapping(v):
	default:
		return s.t.unknown(key, s.source)
	}
	return nil
}

// isMerge reports whether a "<<" value is a merge: a mapping or an alias
// of one, or a list of them.
func isMerge(v *yaml.Node) bool {
	return len(mergeTargets(v)) > 0
}

// mergeTargets returns the mappings a merge value names.
func mergeTargets(v *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	add := func(n *yaml.Node) {
		if n = resolve(n); n.Kind == yaml.MappingNode {
			out = append(out, n)
		}
	}
	add(v)
	if v.Kind == yaml.SequenceNode {
		for _, c := range v.Content {
			add(c)
		}
	}
	return out
}

// resolve follows an alias to its anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// holdsMapping reports whether a key's value is or lists a mapping, which
// no key's type accepts. Aliases are not followed: what they name is
// checked where it is written.
func holdsMapping(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.MappingNode:
		return true
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if holdsMapping(c) {
				return true
			}
		}
	}
	return false
}

// parseTOML decodes TOML text into nested maps after scanTOML has found
// every key known.
func parseTOML(t *keyTable, data []byte, value, source string) (map[string]any, error) {
	if err := scanTOML(t, data, source); err != nil {
		return nil, err
	}
	m, err := toml.Parser().Unmarshal(data)
	if err != nil {
		return nil, parseError(value, err)
	}
	return m, nil
}

// scanTOML checks every key path a TOML file writes (tables, dotted keys,
// inline tables) in file order; a file that does not parse passes, and the
// decoder says why.
func scanTOML(t *keyTable, data []byte, source string) error {
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = tomlKey(e)
			if err := t.path(table, source); err != nil {
				return err
			}
		case unstable.KeyValue:
			if err := tomlKeyValue(t, table, e, source); err != nil {
				return err
			}
		}
	}
	return nil
}

// tomlKeyValue checks a key = value under table, and an inline table's
// keys.
func tomlKeyValue(t *keyTable, table []string, e *unstable.Node, source string) error {
	parts := append(append([]string(nil), table...), tomlKey(e)...)
	if err := t.path(parts, source); err != nil {
		return err
	}
	v := e.Value()
	key := strings.Join(parts, ".")
	switch {
	case t.sections[key] && v.Kind == unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			if err := tomlKeyValue(t, parts, it.Node(), source); err != nil {
				return err
			}
		}
	case t.has(key) && tomlHoldsTable(v):
		l, _ := t.lookup(key)
		return l.mappingError(source)
	}
	return nil
}

// tomlKey returns the parts of a table header's or key-value's key.
func tomlKey(e *unstable.Node) []string {
	var parts []string
	for it := e.Key(); it.Next(); {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// tomlHoldsTable reports whether a value is or lists an inline table.
func tomlHoldsTable(v *unstable.Node) bool {
	switch v.Kind {
	case unstable.InlineTable:
		return true
	case unstable.Array:
		for it := v.Children(); it.Next(); {
			if tomlHoldsTable(it.Node()) {
				return true
			}
		}
	}
	return false
}

// path checks a key path from the top: each part before the last must
// name a section, the last a section, a key or a retired key.
func (t *keyTable) path(parts []string, source string) error {
	key := ""
	for i, p := range parts {
		if i > 0 {
			key += "."
		}
		key += p
		last := i == len(parts)-1
		switch {
		case t.sections[key]:
		case t.has(key) && last:
		case t.has(key):
			l, _ := t.lookup(key)
			return l.mappingError(source)
		case retired[key] && last:
		default:
			return t.unknown(key, source)
		}
	}
	return nil
}

// has reports whether key names a leaf.
func (t *keyTable) has(key string) bool {
	_, ok := t.byKey[key]
	return ok
}

// mappingError is the type error for a key given a mapping (or a list of
// them), as coerce words it.
func (l leaf) mappingError(source string) *Error {
	_, reason := convert(l.typ, map[string]any{})
	if l.typ.Kind() == reflect.Slice {
		reason = "must be a list of values, not of mappings"
	}
	return &Error{Key: l.key, Value: "{...}", Reason: reason, Source: source, Err: ErrType}
}
