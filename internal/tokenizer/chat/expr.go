package chat

import (
	"fmt"
	"strconv"
	"strings"
)

// exprTok is a token of an expression or statement.
type exprTok struct {
	kind byte // 'n' name, 's' string, 'i' int, 'f' float, 'o' operator, 0 end
	text string
}

// lexExpr splits the inside of a tag into tokens.
func lexExpr(src string) ([]exprTok, error) {
	var out []exprTok
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isNameStart(c):
			j := i + 1
			for j < len(src) && (isNameStart(src[j]) || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, exprTok{'n', src[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j, kind := i, byte('i')
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' && kind == 'i' && j+1 < len(src) && src[j+1] >= '0' && src[j+1] <= '9') {
				if src[j] == '.' {
					kind = 'f'
				}
				j++
			}
			out = append(out, exprTok{kind, src[i:j]})
			i = j
		case c == '\'' || c == '"':
			s, n, err := readString(src[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, exprTok{'s', s})
			i += n
		default:
			op := ""
			for _, o := range []string{"**", "//", "==", "!=", "<=", ">="} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if !strings.ContainsRune("+-*/%~<>()[]{},.:|=", rune(c)) {
					return nil, fmt.Errorf("unexpected character %q", c)
				}
				op = string(c)
			}
			out = append(out, exprTok{'o', op})
			i += len(op)
		}
	}
	return append(out, exprTok{}), nil
}

func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// readString reads a quoted Python string literal with backslash escapes
// and returns its value and length.
func readString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'u':
				if i+4 < len(s) {
					if v, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
						b.WriteRune(rune(v))
						i += 4
						continue
					}
				}
				b.WriteString(`\u`)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated string")
}

// expr is a compiled expression.
type expr func(*env) (any, error)

// parser reads expressions from tokens (Jinja's precedence: conditional,
// or, and, not, comparisons and tests, ~, + -, * / // %, **, unary minus,
// postfix: attribute, item, slice, call, filter).
type parser struct {
	toks []exprTok
	pos  int
}

func (p *parser) peek() exprTok { return p.toks[p.pos] }
func (p *parser) next() exprTok { t := p.toks[p.pos]; p.pos++; return t }
func (p *parser) is(kind byte, text string) bool {
	t := p.peek()
	return t.kind == kind && t.text == text
}
func (p *parser) accept(kind byte, text string) bool {
	if p.is(kind, text) {
		p.pos++
		return true
	}
	return false
}
func (p *parser) expect(kind byte, text string) error {
	if !p.accept(kind, text) {
		return fmt.Errorf("expected %q, found %q", text, p.peek().text)
	}
	return nil
}
func (p *parser) done() bool { return p.peek().kind == 0 }

// parseExpr reads a full expression, conditional included.
func (p *parser) parseExpr() (expr, error) {
	a, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if !p.is('n', "if") {
		return a, nil
	}
	p.next()
	cond, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	var b expr = func(*env) (any, error) { return undefined{}, nil }
	if p.accept('n', "else") {
		if b, err = p.parseExpr(); err != nil {
			return nil, err
		}
	}
	return func(e *env) (any, error) {
		c, err := cond(e)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return a(e)
		}
		return b(e)
	}, nil
}

func (p *parser) parseOr() (expr, error) {
	return p.parseBool("or", p.parseAnd, true)
}

func (p *parser) parseAnd() (expr, error) {
	return p.parseBool("and", p.parseNot, false)
}

// binary is the expression op(a, b) of two operands evaluated left to
// right, with apply doing the operation.
func binary(a, b expr, op string, apply func(op string, x, y any) (any, error)) expr {
	return func(e *env) (any, error) {
		x, err := a(e)
		if err != nil {
			return nil, err
		}
		y, err := b(e)
		if err != nil {
			return nil, err
		}
		return apply(op, x, y)
	}
}

// parseBool reads a chain of "or" (or "and") with short-circuit values,
// as Python: the first truthy (falsy) operand or the last.
func (p *parser) parseBool(op string, sub func() (expr, error), isOr bool) (expr, error) {
	a, err := sub()
	if err != nil {
		return nil, err
	}
	for p.accept('n', op) {
		b, err := sub()
		if err != nil {
			return nil, err
		}
		left := a
		a = func(e *env) (any, error) {
			x, err := left(e)
			if err != nil || truthy(x) == isOr {
				return x, err
			}
			return b(e)
		}
	}
	return a, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.accept('n', "not") {
		a, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return func(e *env) (any, error) {
			x, err := a(e)
			return !truthy(x), err
		}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	a, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == 'o' && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">="):
			op = p.next().text
		case t.kind == 'n' && t.text == "in":
			p.next()
			op = "in"
		case t.kind == 'n' && t.text == "not" && p.toks[p.pos+1].kind == 'n' && p.toks[p.pos+1].text == "in":
			p.pos += 2
			op = "not in"
		case t.kind == 'n' && t.text == "is":
			p.next()
			if a, err = p.parseTest(a); err != nil {
				return nil, err
			}
			continue
		default:
			return a, nil
		}
		b, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		a = binary(a, b, op, compare)
	}
}

// parseTest reads the test after "is" (with "not"), e.g. "is not none".
func (p *parser) parseTest(a expr) (expr, error) {
	negate := p.accept('n', "not")
	name := p.next()
	if name.kind != 'n' {
		return nil, fmt.Errorf("expected a test name after \"is\", found %q", name.text)
	}
	var arg expr
	if !p.done() && (p.peek().kind == 's' || p.peek().kind == 'i' || p.peek().kind == 'f' || p.is('o', "(")) {
		var err error
		if p.accept('o', "(") {
			arg, err = p.parseExpr()
			if err == nil {
				err = p.expect('o', ")")
			}
		} else {
			arg, err = p.parsePrimary()
		}
		if err != nil {
			return nil, err
		}
	}
	test, ok := tests[name.text]
	if !ok {
		return nil, fmt.Errorf("test %q: not supported", name.text)
	}
	return func(e *env) (any, error) {
		x, err := a(e)
		if err != nil {
			return nil, err
		}
		var y any
		if arg != nil {
			if y, err = arg(e); err != nil {
				return nil, err
			}
		}
		return test(x, y) != negate, nil
	}, nil
}

func (p *parser) parseConcat() (expr, error) {
	return p.parseBinary([]string{"~"}, p.parseAdd)
}

func (p *parser) parseAdd() (expr, error) {
	return p.parseBinary([]string{"+", "-"}, p.parseMul)
}

func (p *parser) parseMul() (expr, error) {
	return p.parseBinary([]string{"*", "/", "//", "%"}, p.parsePow)
}

func (p *parser) parsePow() (expr, error) {
	return p.parseBinary([]string{"**"}, p.parseUnary)
}

// parseBinary reads a left-associative chain of the operators ops.
func (p *parser) parseBinary(ops []string, sub func() (expr, error)) (expr, error) {
	a, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		found := false
		for _, o := range ops {
			found = found || t.kind == 'o' && t.text == o
		}
		if !found {
			return a, nil
		}
		op := p.next().text
		b, err := sub()
		if err != nil {
			return nil, err
		}
		a = binary(a, b, op, arith)
	}
}

func (p *parser) parseUnary() (expr, error) {
	if p.accept('o', "-") {
		a, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return func(e *env) (any, error) {
			x, err := a(e)
			if err != nil {
				return nil, err
			}
			return arith("-", 0, x)
		}, nil
	}
	return p.parsePostfix()
}

// parsePostfix reads a primary with its attributes, items, slices, calls
// and filters.
func (p *parser) parsePostfix() (expr, error) {
	a, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.accept('o', "."):
			name := p.next()
			if name.kind != 'n' {
				return nil, fmt.Errorf("expected a name after \".\", found %q", name.text)
			}
			a = attrExpr(a, name.text)
		case p.accept('o', "["):
			if a, err = p.parseSubscript(a); err != nil {
				return nil, err
			}
		case p.is('o', "("):
			if a, err = p.parseCall(a); err != nil {
				return nil, err
			}
		case p.accept('o', "|"):
			if a, err = p.parseFilter(a); err != nil {
				return nil, err
			}
		default:
			return a, nil
		}
	}
}

// parseSubscript reads x[i] or x[a:b:c] after the "[".
func (p *parser) parseSubscript(a expr) (expr, error) {
	var parts [3]expr
	slice := false
	for k := 0; k < 3; k++ {
		if !p.is('o', ":") && !p.is('o', "]") {
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			parts[k] = x
		}
		if !p.accept('o', ":") {
			break
		}
		slice = true
	}
	if err := p.expect('o', "]"); err != nil {
		return nil, err
	}
	if !slice {
		idx := parts[0]
		return func(e *env) (any, error) {
			x, err := a(e)
			if err != nil {
				return nil, err
			}
			i, err := idx(e)
			if err != nil {
				return nil, err
			}
			return item(x, i), nil
		}, nil
	}
	return func(e *env) (any, error) {
		x, err := a(e)
		if err != nil {
			return nil, err
		}
		var bounds [3]any
		for k, part := range parts {
			if part != nil {
				if bounds[k], err = part(e); err != nil {
					return nil, err
				}
			}
		}
		return sliceOf(x, bounds)
	}, nil
}

// parseArgs reads "(a, b, k=v)".
func (p *parser) parseArgs() ([]expr, map[string]expr, error) {
	if err := p.expect('o', "("); err != nil {
		return nil, nil, err
	}
	var args []expr
	kw := map[string]expr{}
	for !p.accept('o', ")") {
		if p.peek().kind == 'n' && p.toks[p.pos+1].kind == 'o' && p.toks[p.pos+1].text == "=" {
			name := p.next().text
			p.next()
			x, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kw[name] = x
		} else {
			x, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, x)
		}
		if !p.accept('o', ",") {
			if err := p.expect('o', ")"); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return args, kw, nil
}

// parseCall reads a call of a function or method value.
func (p *parser) parseCall(fn expr) (expr, error) {
	args, kw, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return func(e *env) (any, error) {
		f, err := fn(e)
		if err != nil {
			return nil, err
		}
		callable, ok := f.(function)
		if !ok {
			return nil, fmt.Errorf("%s is not callable", describe(f))
		}
		vals, kws, err := evalArgs(e, args, kw)
		if err != nil {
			return nil, err
		}
		return callable(vals, kws)
	}, nil
}

// parseFilter reads "name" or "name(args)" after a "|".
func (p *parser) parseFilter(a expr) (expr, error) {
	name := p.next()
	if name.kind != 'n' {
		return nil, fmt.Errorf("expected a filter name, found %q", name.text)
	}
	f, ok := filters[name.text]
	if !ok {
		return nil, fmt.Errorf("filter %q: not supported", name.text)
	}
	var args []expr
	kw := map[string]expr{}
	if p.is('o', "(") {
		var err error
		if args, kw, err = p.parseArgs(); err != nil {
			return nil, err
		}
	}
	return func(e *env) (any, error) {
		x, err := a(e)
		if err != nil {
			return nil, err
		}
		vals, kws, err := evalArgs(e, args, kw)
		if err != nil {
			return nil, err
		}
		return f(x, vals, kws)
	}, nil
}

func evalArgs(e *env, args []expr, kw map[string]expr) ([]any, map[string]any, error) {
	vals := make([]any, len(args))
	for i, a := range args {
		v, err := a(e)
		if err != nil {
			return nil, nil, err
		}
		vals[i] = v
	}
	kws := map[string]any{}
	for k, a := range kw {
		v, err := a(e)
		if err != nil {
			return nil, nil, err
		}
		kws[k] = v
	}
	return vals, kws, nil
}

// parsePrimary reads a literal, a name, a list, a dict or a parenthesised
// expression (or tuple).
func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case 's':
		s := t.text
		for p.peek().kind == 's' { // adjacent literals concatenate
			s += p.next().text
		}
		return constant(s), nil
	case 'i':
		n, err := strconv.Atoi(t.text)
		if err != nil {
			return nil, err
		}
		return constant(n), nil
	case 'f':
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, err
		}
		return constant(f), nil
	case 'n':
		switch t.text {
		case "true", "True":
			return constant(true), nil
		case "false", "False":
			return constant(false), nil
		case "none", "None":
			return constant(nil), nil
		}
		name := t.text
		return func(e *env) (any, error) { return e.lookup(name), nil }, nil
	case 'o':
		switch t.text {
		case "(":
			return p.parseSeq(")", true)
		case "[":
			return p.parseSeq("]", false)
		case "{":
			return p.parseDict()
		}
	}
	if t.kind == 0 {
		return nil, fmt.Errorf("unexpected end of expression")
	}
	return nil, fmt.Errorf("unexpected %q", t.text)
}

// parseSeq reads the items of a list or of a parenthesised expression or
// tuple, up to close.
func (p *parser) parseSeq(close string, paren bool) (expr, error) {
	var items []expr
	comma := false
	for !p.accept('o', close) {
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.accept('o', ",") {
			if err := p.expect('o', close); err != nil {
				return nil, err
			}
			break
		}
		comma = true
	}
	if paren && len(items) == 1 && !comma {
		return items[0], nil
	}
	return func(e *env) (any, error) {
		out := make([]any, len(items))
		for i, x := range items {
			v, err := x(e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}, nil
}

func (p *parser) parseDict() (expr, error) {
	var keys, vals []expr
	for !p.accept('o', "}") {
		k, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expect('o', ":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		keys, vals = append(keys, k), append(vals, v)
		if !p.accept('o', ",") {
			if err := p.expect('o', "}"); err != nil {
				return nil, err
			}
			break
		}
	}
	return func(e *env) (any, error) {
		d := newDict()
		for i := range keys {
			k, err := keys[i](e)
			if err != nil {
				return nil, err
			}
			v, err := vals[i](e)
			if err != nil {
				return nil, err
			}
			d.set(toString(k), v)
		}
		return d, nil
	}, nil
}

func constant(v any) expr { return func(*env) (any, error) { return v, nil } }

func attrExpr(a expr, name string) expr {
	return func(e *env) (any, error) {
		x, err := a(e)
		if err != nil {
			return nil, err
		}
		return attr(x, name), nil
	}
}
