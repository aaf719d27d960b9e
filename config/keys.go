package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// leaf is one configuration key: its dotted name, Go type, usage and the
// field index path from Config.
type leaf struct {
	key   string
	typ   reflect.Type
	help  string
	index []int
}

var durationType = reflect.TypeOf(time.Duration(0))

// keyTable is the set of keys of a Config, in struct order.
type keyTable struct {
	leaves   []leaf
	byKey    map[string]int
	sections map[string]bool // dotted names of sections (non-leaf keys)
}

// keys walks Config's koanf tags. It is cheap enough to rebuild per Load,
// which keeps the package free of global state.
func keys() *keyTable {
	t := &keyTable{byKey: map[string]int{}, sections: map[string]bool{}}
	t.walk(reflect.TypeOf(Config{}), "", nil)
	return t
}

func (t *keyTable) walk(typ reflect.Type, prefix string, index []int) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name := f.Tag.Get("koanf")
		if name == "" {
			continue
		}
		key := prefix + name
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			t.sections[key] = true
			t.walk(f.Type, key+".", idx)
			continue
		}
		t.byKey[key] = len(t.leaves)
		t.leaves = append(t.leaves, leaf{key: key, typ: f.Type, help: f.Tag.Get("help"), index: idx})
	}
}

func (t *keyTable) lookup(key string) (leaf, bool) {
	i, ok := t.byKey[key]
	if !ok {
		return leaf{}, false
	}
	return t.leaves[i], true
}

// suggest returns the known key closest to key, or "" if none is close.
func (t *keyTable) suggest(key string) string {
	best, bestD := "", 4
	for _, l := range t.leaves {
		if d := editDistance(key, l.key); d < bestD {
			best, bestD = l.key, d
		}
	}
	return best
}

// retired are keys that earlier builds wrote into a run's config.yaml and
// that mean nothing now. A file may hold them, so that a run saved by such
// a build resumes; they are skipped. Flags and the environment still
// refuse them.
var retired = map[string]bool{
	"cluster.provider": true, // the cluster is the learner and the nodes that join it (cluster.seeds)
}

// flatten turns a nested map from a file into dotted keys, reporting
// unknown keys and sections given as scalars, and skipping retired keys.
func (t *keyTable) flatten(m map[string]any, prefix, source string, dst map[string]any) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		key := prefix + k
		v := m[k]
		if t.sections[key] {
			if v == nil {
				continue // "train:" with nothing under it
			}
			sub, ok := v.(map[string]any)
			if !ok {
				return &Error{Key: key, Value: formatValue(v), Reason: "must be a section (a mapping of keys)", Source: source, Err: ErrType}
			}
			if err := t.flatten(sub, key+".", source, dst); err != nil {
				return err
			}
			continue
		}
		if _, ok := t.byKey[key]; !ok {
			if retired[key] {
				continue
			}
			return t.unknown(key, source)
		}
		dst[key] = v
	}
	return nil
}

func (t *keyTable) unknown(key, source string) *Error {
	reason := "unknown key"
	if s := t.suggest(key); s != "" {
		reason += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return &Error{Key: key, Reason: reason, Source: source, Err: ErrUnknownKey}
}

// coerce converts a raw value from a file (YAML/TOML types) or from text
// (env, flags) into the key's Go type.
func (l leaf) coerce(raw any, source string) (any, error) {
	v, reason := convert(l.typ, raw)
	if reason != "" {
		return nil, &Error{Key: l.key, Value: formatValue(raw), Reason: reason, Source: source, Err: ErrType}
	}
	return v, nil
}

func convert(typ reflect.Type, raw any) (any, string) {
	if typ == durationType {
		return toDuration(raw)
	}
	switch typ.Kind() {
	case reflect.String:
		if s, ok := raw.(string); ok {
			return s, ""
		}
		return nil, "must be a string"
	case reflect.Bool:
		return toBool(raw)
	case reflect.Int, reflect.Int64:
		n, reason := toInt(raw)
		if reason != "" {
			return nil, reason
		}
		if typ.Kind() == reflect.Int {
			return int(n), ""
		}
		return n, ""
	case reflect.Float64:
		return toFloat(raw)
	case reflect.Slice:
		return toSlice(typ.Elem(), raw)
	}
	panic(fmt.Sprintf("config: key of unsupported type %s", typ))
}

func toBool(raw any) (any, string) {
	switch v := raw.(type) {
	case bool:
		return v, ""
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b, ""
		}
	}
	return nil, "must be true or false"
}

func toInt(raw any) (int64, string) {
	const reason = "must be an integer"
	switch v := raw.(type) {
	case int:
		return int64(v), ""
	case int64:
		return v, ""
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), ""
		}
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), ""
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n, ""
		}
	}
	return 0, reason
}

func toFloat(raw any) (any, string) {
	switch v := raw.(type) {
	case float64:
		return v, ""
	case int:
		return float64(v), ""
	case int64:
		return float64(v), ""
	case uint64:
		return float64(v), ""
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			return f, ""
		}
	}
	return nil, "must be a number"
}

func toDuration(raw any) (any, string) {
	switch v := raw.(type) {
	case time.Duration:
		return v, ""
	case string:
		if d, err := time.ParseDuration(strings.TrimSpace(v)); err == nil {
			return d, ""
		}
	case int, int64:
		if n, _ := toInt(v); n == 0 {
			return time.Duration(0), ""
		}
	}
	return nil, "must be a duration such as 500ms, 10s or 2m"
}

// toSlice accepts a list, or a comma-separated string (the form env
// variables and flags use).
func toSlice(elem reflect.Type, raw any) (any, string) {
	var items []any
	switch v := raw.(type) {
	case []any:
		items = v
	case []string:
		for _, s := range v {
			items = append(items, s)
		}
	case []float64:
		for _, f := range v {
			items = append(items, f)
		}
	case string:
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
	default:
		return nil, "must be a list"
	}
	out := reflect.MakeSlice(reflect.SliceOf(elem), 0, len(items))
	for i, it := range items {
		v, reason := convert(elem, it)
		if reason != "" {
			return nil, fmt.Sprintf("item %d %s", i, reason)
		}
		out = reflect.Append(out, reflect.ValueOf(v))
	}
	return out.Interface(), ""
}

// formatValue renders a raw value for an error line: strings quoted,
// everything else as Go prints it.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case time.Duration:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case map[string]any:
		return "{...}"
	}
	return fmt.Sprint(v)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// values returns the config's leaves as dotted key → Go value.
func (t *keyTable) values(c *Config) map[string]any {
	root := reflect.ValueOf(c).Elem()
	out := make(map[string]any, len(t.leaves))
	for _, l := range t.leaves {
		out[l.key] = root.FieldByIndex(l.index).Interface()
	}
	return out
}
