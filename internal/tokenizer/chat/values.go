package chat

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Values are Go values: string, int, float64, bool, nil (None), []any
// (list), *dict (mapping), function, and undefined.

// undefined is a name or attribute that does not exist: it renders as ""
// and is false, as Jinja's default Undefined.
type undefined struct{}

// function is a callable value: a global, or a method bound to its value.
type function func(args []any, kw map[string]any) (any, error)

// dict is a mapping that keeps insertion order, as Python's dict.
type dict struct {
	keys []string
	m    map[string]any
}

func newDict() *dict { return &dict{m: map[string]any{}} }

func (d *dict) set(k string, v any) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

func (d *dict) get(k string) (any, bool) {
	v, ok := d.m[k]
	return v, ok
}

// MarshalJSON writes the keys in order, as Python's json.dumps.
func (d *dict) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(d.m[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteString(": ")
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// truthy is Python's truth value.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *dict:
		return len(x.keys) > 0
	}
	return true
}

// toString is Python's str() of a value, as Jinja prints it.
func toString(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case undefined:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e16 {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = repr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *dict:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = repr(k) + ": " + repr(x.m[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// repr is Python's repr() for the values a template prints inside lists.
func repr(v any) string {
	if s, ok := v.(string); ok {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
	}
	return toString(v)
}

// describe names a value's type for errors.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "none"
	case undefined:
		return "undefined"
	case string:
		return "a string"
	case int, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case *dict:
		return "a mapping"
	case function:
		return "a function"
	}
	return fmt.Sprintf("%T", v)
}

// attr is x.name: a mapping's key, or a method.
func attr(x any, name string) any {
	if d, ok := x.(*dict); ok {
		if v, ok := d.get(name); ok {
			return v
		}
	}
	if m := method(x, name); m != nil {
		return m
	}
	return undefined{}
}

// item is x[i]: a list index (negative from the end), a mapping key, or a
// character of a string.
func item(x, i any) any {
	switch c := x.(type) {
	case []any:
		if n, ok := i.(int); ok {
			if n < 0 {
				n += len(c)
			}
			if n >= 0 && n < len(c) {
				return c[n]
			}
		}
	case *dict:
		if v, ok := c.get(toString(i)); ok {
			return v
		}
		if s, ok := i.(string); ok {
			if m := method(x, s); m != nil {
				return m
			}
		}
	case string:
		r := []rune(c)
		if n, ok := i.(int); ok {
			if n < 0 {
				n += len(r)
			}
			if n >= 0 && n < len(r) {
				return string(r[n])
			}
		}
	}
	return undefined{}
}

// sliceOf is x[a:b:c] of a list or string.
func sliceOf(x any, b [3]any) (any, error) {
	n := 0
	switch c := x.(type) {
	case []any:
		n = len(c)
	case string:
		n = len([]rune(c))
	default:
		return nil, fmt.Errorf("cannot slice %s", describe(x))
	}
	step := 1
	if s, ok := b[2].(int); ok {
		step = s
	}
	if step == 0 {
		return nil, fmt.Errorf("slice step cannot be zero")
	}
	bound := func(v any, def int) int {
		k, ok := v.(int)
		if !ok {
			return def
		}
		if k < 0 {
			k += n
		}
		lo, hi := 0, n
		if step < 0 {
			lo, hi = -1, n-1
		}
		return min(max(k, lo), hi)
	}
	var idx []int
	if step > 0 {
		for i := bound(b[0], 0); i < bound(b[1], n); i += step {
			idx = append(idx, i)
		}
	} else {
		for i := bound(b[0], n-1); i > bound(b[1], -1); i += step {
			idx = append(idx, i)
		}
	}
	switch c := x.(type) {
	case []any:
		out := make([]any, len(idx))
		for k, i := range idx {
			out[k] = c[i]
		}
		return out, nil
	default:
		r := []rune(c.(string))
		var s strings.Builder
		for _, i := range idx {
			s.WriteRune(r[i])
		}
		return s.String(), nil
	}
}

// compare evaluates ==, !=, <, >, <=, >=, in and not in.
func compare(op string, x, y any) (any, error) {
	switch op {
	case "==":
		return equal(x, y), nil
	case "!=":
		return !equal(x, y), nil
	case "in", "not in":
		in, err := contains(y, x)
		return in == (op == "in"), err
	}
	c, err := order(x, y)
	if err != nil {
		return nil, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

func equal(x, y any) bool {
	if a, ok := number(x); ok {
		if b, ok := number(y); ok {
			return a == b
		}
	}
	switch a := x.(type) {
	case []any:
		b, ok := y.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case *dict:
		b, ok := y.(*dict)
		return ok && a == b
	case undefined:
		_, ok := y.(undefined)
		return ok
	}
	return x == y
}

// number is a numeric value (bools count, as in Python).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func order(x, y any) (int, error) {
	if a, ok := number(x); ok {
		if b, ok := number(y); ok {
			switch {
			case a < b:
				return -1, nil
			case a > b:
				return 1, nil
			}
			return 0, nil
		}
	}
	if a, ok := x.(string); ok {
		if b, ok := y.(string); ok {
			return strings.Compare(a, b), nil
		}
	}
	return 0, fmt.Errorf("cannot order %s and %s", describe(x), describe(y))
}

func contains(container, x any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string, not %s", describe(x))
		}
		return strings.Contains(c, s), nil
	case []any:
		for _, e := range c {
			if equal(e, x) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		_, ok := c.get(toString(x))
		return ok, nil
	case undefined:
		return false, fmt.Errorf("'in' on an undefined value")
	}
	return false, fmt.Errorf("'in' needs a string, list or mapping, not %s", describe(container))
}

// arith evaluates + - * / // % ** and ~.
func arith(op string, x, y any) (any, error) {
	if op == "~" {
		return toString(x) + toString(y), nil
	}
	if v, ok, err := sequenceArith(op, x, y); ok || err != nil {
		return v, err
	}
	ai, aInt := x.(int)
	bi, bInt := y.(int)
	if aInt && bInt && op != "/" && op != "**" {
		return intArith(op, ai, bi)
	}
	a, okA := number(x)
	b, okB := number(y)
	if !okA || !okB {
		return nil, fmt.Errorf("cannot apply %s to %s and %s", op, describe(x), describe(y))
	}
	if op == "**" && aInt && bInt && bi >= 0 {
		return int(math.Pow(a, b)), nil
	}
	return floatArith(op, a, b)
}

// sequenceArith is + on strings and lists and * of a string by an int;
// ok is false for other operands.
func sequenceArith(op string, x, y any) (v any, ok bool, err error) {
	switch a := x.(type) {
	case string:
		if op == "+" {
			if b, ok := y.(string); ok {
				return a + b, true, nil
			}
			return nil, false, fmt.Errorf("cannot add %s to a string", describe(y))
		}
		if n, isInt := y.(int); op == "*" && isInt {
			return strings.Repeat(a, max(n, 0)), true, nil
		}
	case []any:
		if b, isList := y.([]any); op == "+" && isList {
			return append(append([]any(nil), a...), b...), true, nil
		}
	}
	return nil, false, nil
}

// intArith is + - * // and % on two ints, flooring as Python does.
func intArith(op string, a, b int) (any, error) {
	if v, ok := addSubMul(op, a, b); ok {
		return v, nil
	}
	switch op {
	case "//", "%":
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		q, r := a/b, a%b
		if r != 0 && (r < 0) != (b < 0) { // Python floors
			q, r = q-1, r+b
		}
		if op == "//" {
			return q, nil
		}
		return r, nil
	}
	return nil, fmt.Errorf("operator %s: not supported", op)
}

// addSubMul is + - or * (op) on two numbers of one kind; ok is false
// for another op.
func addSubMul[T int | float64](op string, a, b T) (v T, ok bool) {
	switch op {
	case "+":
		return a + b, true
	case "-":
		return a - b, true
	case "*":
		return a * b, true
	}
	return v, false
}

// floatArith is + - * / // % and ** on two numbers.
func floatArith(op string, a, b float64) (any, error) {
	if v, ok := addSubMul(op, a, b); ok {
		return v, nil
	}
	if op == "**" {
		return math.Pow(a, b), nil
	}
	if op != "/" && op != "//" && op != "%" {
		return nil, fmt.Errorf("operator %s: not supported", op)
	}
	if b == 0 {
		return nil, fmt.Errorf("division by zero")
	}
	switch op {
	case "/":
		return a / b, nil
	case "//":
		return math.Floor(a / b), nil
	}
	return a - b*math.Floor(a/b), nil
}

// tests are Jinja's "is" tests.
var tests = map[string]func(x, arg any) bool{
	"defined":   func(x, _ any) bool { _, u := x.(undefined); return !u },
	"undefined": func(x, _ any) bool { _, u := x.(undefined); return u },
	"none":      func(x, _ any) bool { return x == nil },
	"string":    func(x, _ any) bool { _, ok := x.(string); return ok },
	"number": func(x, _ any) bool {
		switch x.(type) {
		case int, float64:
			return true
		}
		return false
	},
	"integer":  func(x, _ any) bool { _, ok := x.(int); return ok },
	"float":    func(x, _ any) bool { _, ok := x.(float64); return ok },
	"boolean":  func(x, _ any) bool { _, ok := x.(bool); return ok },
	"true":     func(x, _ any) bool { return x == true },
	"false":    func(x, _ any) bool { return x == false },
	"mapping":  func(x, _ any) bool { _, ok := x.(*dict); return ok },
	"sequence": func(x, _ any) bool { return isSequence(x) },
	"iterable": func(x, _ any) bool { return isSequence(x) },
	"callable": func(x, _ any) bool { _, ok := x.(function); return ok },
	"odd":      func(x, _ any) bool { n, ok := x.(int); return ok && n%2 != 0 },
	"even":     func(x, _ any) bool { n, ok := x.(int); return ok && n%2 == 0 },
	"equalto":  func(x, y any) bool { return equal(x, y) },
	"eq":       func(x, y any) bool { return equal(x, y) },
}

func isSequence(x any) bool {
	switch x.(type) {
	case string, []any, *dict:
		return true
	}
	return false
}

// iterate lists the items a for loop visits: a list's items, a string's
// characters, a mapping's keys.
func iterate(x any) ([]any, error) {
	switch c := x.(type) {
	case []any:
		return c, nil
	case *dict:
		out := make([]any, len(c.keys))
		for i, k := range c.keys {
			out[i] = k
		}
		return out, nil
	case string:
		var out []any
		for _, r := range c {
			out = append(out, string(r))
		}
		return out, nil
	case undefined, nil:
		return nil, nil
	}
	return nil, fmt.Errorf("cannot iterate over %s", describe(x))
}

// filters are Jinja's filters the chat templates use.
var filters = map[string]func(x any, args []any, kw map[string]any) (any, error){
	"trim":   func(x any, _ []any, _ map[string]any) (any, error) { return strings.TrimSpace(toString(x)), nil },
	"upper":  func(x any, _ []any, _ map[string]any) (any, error) { return strings.ToUpper(toString(x)), nil },
	"lower":  func(x any, _ []any, _ map[string]any) (any, error) { return strings.ToLower(toString(x)), nil },
	"string": func(x any, _ []any, _ map[string]any) (any, error) { return toString(x), nil },
	"safe":   func(x any, _ []any, _ map[string]any) (any, error) { return x, nil },
	"capitalize": func(x any, _ []any, _ map[string]any) (any, error) {
		r := []rune(strings.ToLower(toString(x)))
		if len(r) > 0 {
			r[0] = unicode.ToUpper(r[0])
		}
		return string(r), nil
	},
	"length": lengthFilter,
	"count":  lengthFilter,
	"first": func(x any, _ []any, _ map[string]any) (any, error) {
		items, err := iterate(x)
		if err != nil || len(items) == 0 {
			return undefined{}, err
		}
		return items[0], nil
	},
	"last": func(x any, _ []any, _ map[string]any) (any, error) {
		items, err := iterate(x)
		if err != nil || len(items) == 0 {
			return undefined{}, err
		}
		return items[len(items)-1], nil
	},
	"join": func(x any, args []any, _ map[string]any) (any, error) {
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		sep := ""
		if len(args) > 0 {
			sep = toString(args[0])
		}
		parts := make([]string, len(items))
		for i, v := range items {
			parts[i] = toString(v)
		}
		return strings.Join(parts, sep), nil
	},
	"default": func(x any, args []any, _ map[string]any) (any, error) {
		_, undef := x.(undefined)
		if undef || len(args) > 1 && truthy(args[1]) && !truthy(x) {
			if len(args) > 0 {
				return args[0], nil
			}
			return "", nil
		}
		return x, nil
	},
	"list": func(x any, _ []any, _ map[string]any) (any, error) { return iterate(x) },
	"items": func(x any, _ []any, _ map[string]any) (any, error) {
		d, ok := x.(*dict)
		if !ok {
			return nil, fmt.Errorf("items of %s", describe(x))
		}
		return dictItems(d), nil
	},
	"int": func(x any, _ []any, _ map[string]any) (any, error) {
		if f, ok := number(x); ok {
			return int(f), nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(toString(x)))
		if err != nil {
			return 0, nil
		}
		return n, nil
	},
	"replace": func(x any, args []any, _ map[string]any) (any, error) {
		if len(args) < 2 {
			return nil, fmt.Errorf("replace needs two arguments")
		}
		return strings.ReplaceAll(toString(x), toString(args[0]), toString(args[1])), nil
	},
	"tojson": func(x any, _ []any, kw map[string]any) (any, error) {
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		if indent, ok := kw["indent"].(int); ok {
			var out strings.Builder
			if err := jsonIndent(&out, b, indent); err != nil {
				return nil, err
			}
			return out.String(), nil
		}
		return pythonJSON(b), nil
	},
}

func lengthFilter(x any, _ []any, _ map[string]any) (any, error) {
	switch c := x.(type) {
	case string:
		return len([]rune(c)), nil
	case []any:
		return len(c), nil
	case *dict:
		return len(c.keys), nil
	}
	return nil, fmt.Errorf("length of %s", describe(x))
}

func dictItems(d *dict) []any {
	out := make([]any, len(d.keys))
	for i, k := range d.keys {
		out[i] = []any{k, d.m[k]}
	}
	return out
}

// pythonJSON rewrites Go's compact JSON with the separators of Python's
// json.dumps (", " and ": ") and its escapes of <, > and &.
func pythonJSON(b []byte) string {
	var out strings.Builder
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			if i+5 < len(b) && string(b[i:i+6]) == `\u003c` {
				out.WriteByte('<')
				i += 5
				continue
			}
			if i+5 < len(b) && string(b[i:i+6]) == `\u003e` {
				out.WriteByte('>')
				i += 5
				continue
			}
			if i+5 < len(b) && string(b[i:i+6]) == `\u0026` {
				out.WriteByte('&')
				i += 5
				continue
			}
			out.WriteByte(c)
			i++
			out.WriteByte(b[i])
			continue
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			out.WriteByte(c)
			if !(i+1 < len(b) && (b[i+1] == ' ' || b[i+1] == '\n')) {
				out.WriteByte(' ')
			}
			continue
		}
		out.WriteByte(c)
	}
	return out.String()
}

func jsonIndent(out *strings.Builder, b []byte, indent int) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	nb, err := json.MarshalIndent(v, "", strings.Repeat(" ", indent))
	if err != nil {
		return err
	}
	out.WriteString(pythonJSON(nb))
	return nil
}

// method returns x's method name bound to x, nil if it has none.
func method(x any, name string) function {
	switch c := x.(type) {
	case string:
		return stringMethod(c, name)
	case *dict:
		switch name {
		case "items":
			return func([]any, map[string]any) (any, error) { return dictItems(c), nil }
		case "keys":
			return func([]any, map[string]any) (any, error) { return iterate(c) }
		case "values":
			return func([]any, map[string]any) (any, error) {
				out := make([]any, len(c.keys))
				for i, k := range c.keys {
					out[i] = c.m[k]
				}
				return out, nil
			}
		case "get":
			return func(args []any, _ map[string]any) (any, error) {
				if len(args) == 0 {
					return nil, fmt.Errorf("get needs a key")
				}
				if v, ok := c.get(toString(args[0])); ok {
					return v, nil
				}
				if len(args) > 1 {
					return args[1], nil
				}
				return nil, nil
			}
		}
	}
	return nil
}

func stringMethod(s, name string) function {
	chars := func(args []any) string {
		if len(args) > 0 && args[0] != nil {
			return toString(args[0])
		}
		return " \t\n\r\v\f"
	}
	switch name {
	case "strip":
		return func(args []any, _ map[string]any) (any, error) { return strings.Trim(s, chars(args)), nil }
	case "lstrip":
		return func(args []any, _ map[string]any) (any, error) { return strings.TrimLeft(s, chars(args)), nil }
	case "rstrip":
		return func(args []any, _ map[string]any) (any, error) { return strings.TrimRight(s, chars(args)), nil }
	case "upper":
		return func([]any, map[string]any) (any, error) { return strings.ToUpper(s), nil }
	case "lower":
		return func([]any, map[string]any) (any, error) { return strings.ToLower(s), nil }
	case "startswith", "endswith":
		return affixMethod(s, name)
	case "split":
		return func(args []any, _ map[string]any) (any, error) {
			var parts []string
			if len(args) == 0 || args[0] == nil {
				parts = strings.Fields(s)
			} else {
				parts = strings.Split(s, toString(args[0]))
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out, nil
		}
	case "replace":
		return func(args []any, _ map[string]any) (any, error) {
			if len(args) < 2 {
				return nil, fmt.Errorf("replace needs two arguments")
			}
			return strings.ReplaceAll(s, toString(args[0]), toString(args[1])), nil
		}
	}
	return nil
}

// affixMethod is s.startswith or s.endswith (name), whose argument is a
// string or a list of strings any of which may match.
func affixMethod(s, name string) function {
	f := strings.HasPrefix
	if name == "endswith" {
		f = strings.HasSuffix
	}
	return func(args []any, _ map[string]any) (any, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("%s needs an argument", name)
		}
		if list, ok := args[0].([]any); ok {
			for _, p := range list {
				if f(s, toString(p)) {
					return true, nil
				}
			}
			return false, nil
		}
		return f(s, toString(args[0])), nil
	}
}

// sortedKeys lists a map's keys in order (for deterministic errors).
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
