package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// node is a rendered part of a template.
type node interface {
	render(e *env, out *strings.Builder) error
}

type textNode string

func (n textNode) render(_ *env, out *strings.Builder) error {
	out.WriteString(string(n))
	return nil
}

type printNode struct{ x expr }

func (n printNode) render(e *env, out *strings.Builder) error {
	v, err := n.x(e)
	if err != nil {
		return err
	}
	out.WriteString(toString(v))
	return nil
}

type ifNode struct {
	conds  []expr
	bodies [][]node
	orElse []node
}

func (n ifNode) render(e *env, out *strings.Builder) error {
	for i, c := range n.conds {
		v, err := c(e)
		if err != nil {
			return err
		}
		if truthy(v) {
			return renderAll(n.bodies[i], e, out)
		}
	}
	return renderAll(n.orElse, e, out)
}

type forNode struct {
	vars   []string
	iter   expr
	filter expr
	body   []node
	orElse []node
}

// errBreak and errContinue carry the loop controls out of a body.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

func (n forNode) render(e *env, out *strings.Builder) error {
	v, err := n.iter(e)
	if err != nil {
		return err
	}
	items, err := iterate(v)
	if err != nil {
		return err
	}
	if n.filter != nil {
		var kept []any
		for _, it := range items {
			e.push()
			e.bind(n.vars, it)
			ok, err := n.filter(e)
			e.pop()
			if err != nil {
				return err
			}
			if truthy(ok) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return renderAll(n.orElse, e, out)
	}
	for i, it := range items {
		e.push()
		e.bind(n.vars, it)
		e.set("loop", loopInfo(i, items))
		err := renderAll(n.body, e, out)
		e.pop()
		if errors.Is(err, errBreak) {
			break
		}
		if err != nil && !errors.Is(err, errContinue) {
			return err
		}
	}
	return nil
}

// loopInfo is the loop variable of iteration i.
func loopInfo(i int, items []any) *dict {
	d := newDict()
	n := len(items)
	d.set("index", i+1)
	d.set("index0", i)
	d.set("revindex", n-i)
	d.set("revindex0", n-i-1)
	d.set("first", i == 0)
	d.set("last", i == n-1)
	d.set("length", n)
	if i > 0 {
		d.set("previtem", items[i-1])
	}
	if i < n-1 {
		d.set("nextitem", items[i+1])
	}
	return d
}

type setNode struct {
	name, attr string // attr: set ns.attr = ...
	x          expr
}

func (n setNode) render(e *env, _ *strings.Builder) error {
	v, err := n.x(e)
	if err != nil {
		return err
	}
	if n.attr == "" {
		e.set(n.name, v)
		return nil
	}
	ns, ok := e.lookup(n.name).(*dict)
	if !ok {
		return fmt.Errorf("set %s.%s: %s is not a namespace", n.name, n.attr, n.name)
	}
	ns.set(n.attr, v)
	return nil
}

type controlNode struct{ err error }

func (n controlNode) render(*env, *strings.Builder) error { return n.err }

func renderAll(nodes []node, e *env, out *strings.Builder) error {
	for _, n := range nodes {
		if err := n.render(e, out); err != nil {
			return err
		}
	}
	return nil
}

// env holds the variables: globals, then one scope per loop iteration
// (Jinja's scoping: a set inside a loop does not outlive the iteration).
type env struct {
	scopes []map[string]any
}

func (e *env) push()                  { e.scopes = append(e.scopes, map[string]any{}) }
func (e *env) pop()                   { e.scopes = e.scopes[:len(e.scopes)-1] }
func (e *env) set(name string, v any) { e.scopes[len(e.scopes)-1][name] = v }

func (e *env) lookup(name string) any {
	for i := len(e.scopes) - 1; i >= 0; i-- {
		if v, ok := e.scopes[i][name]; ok {
			return v
		}
	}
	return undefined{}
}

// bind assigns a loop item to the loop variables (unpacking pairs).
func (e *env) bind(vars []string, it any) {
	if len(vars) == 1 {
		e.set(vars[0], it)
		return
	}
	list, _ := it.([]any)
	for i, v := range vars {
		if i < len(list) {
			e.set(v, list[i])
		} else {
			e.set(v, undefined{})
		}
	}
}

// builder turns the segments of a template into nodes.
type builder struct {
	segs []segment
	pos  int
}

// parseBody reads nodes until one of the statements in stop (returned,
// with its tokens) or the end.
func (b *builder) parseBody(stop ...string) ([]node, string, *parser, error) {
	var nodes []node
	for b.pos < len(b.segs) {
		s := b.segs[b.pos]
		b.pos++
		switch s.kind {
		case tokText:
			nodes = append(nodes, textNode(s.text))
		case tokExpr:
			p, err := newParser(s)
			if err != nil {
				return nil, "", nil, err
			}
			x, err := p.parseExpr()
			if err == nil && !p.done() {
				err = fmt.Errorf("unexpected %q", p.peek().text)
			}
			if err != nil {
				return nil, "", nil, fmt.Errorf("offset %d: {{ %s }}: %w", s.pos, s.text, err)
			}
			nodes = append(nodes, printNode{x})
		case tokStmt:
			p, err := newParser(s)
			if err != nil {
				return nil, "", nil, err
			}
			kw := p.next().text
			for _, st := range stop {
				if kw == st {
					return nodes, kw, p, nil
				}
			}
			n, err := b.statement(kw, p)
			if err != nil {
				return nil, "", nil, fmt.Errorf("offset %d: {%% %s %%}: %w", s.pos, s.text, err)
			}
			if n != nil {
				nodes = append(nodes, n)
			}
		}
	}
	if len(stop) > 0 {
		return nil, "", nil, fmt.Errorf("missing {%% %s %%}", stop[len(stop)-1])
	}
	return nodes, "", nil, nil
}

func newParser(s segment) (*parser, error) {
	toks, err := lexExpr(s.text)
	if err != nil {
		return nil, fmt.Errorf("offset %d: %q: %w", s.pos, s.text, err)
	}
	return &parser{toks: toks}, nil
}

// statement parses one block statement (and its body).
func (b *builder) statement(kw string, p *parser) (node, error) {
	switch kw {
	case "if":
		return b.parseIf(p)
	case "for":
		return b.parseFor(p)
	case "set":
		return parseSet(p)
	case "break":
		return controlNode{errBreak}, nil
	case "continue":
		return controlNode{errContinue}, nil
	case "generation": // transformers' AssistantTracker: the body renders as is
		body, _, _, err := b.parseBody("endgeneration")
		if err != nil {
			return nil, err
		}
		return ifNode{conds: []expr{constant(true)}, bodies: [][]node{body}}, nil
	}
	return nil, fmt.Errorf("statement %q: not supported", kw)
}

func (b *builder) parseIf(p *parser) (node, error) {
	var n ifNode
	for {
		cond, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		body, end, next, err := b.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, cond), append(n.bodies, body)
		switch end {
		case "elif":
			p = next
			continue
		case "else":
			if n.orElse, _, _, err = b.parseBody("endif"); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (b *builder) parseFor(p *parser) (node, error) {
	var n forNode
	for {
		t := p.next()
		if t.kind != 'n' {
			return nil, fmt.Errorf("expected a loop variable, found %q", t.text)
		}
		n.vars = append(n.vars, t.text)
		if !p.accept('o', ",") {
			break
		}
	}
	if err := p.expect('n', "in"); err != nil {
		return nil, err
	}
	iter, err := p.parseOr() // "if" after the iterable filters, it is no conditional
	if err != nil {
		return nil, err
	}
	n.iter = iter
	if p.accept('n', "if") {
		if n.filter, err = p.parseOr(); err != nil {
			return nil, err
		}
	}
	if !p.done() {
		return nil, fmt.Errorf("unexpected %q", p.peek().text)
	}
	body, end, _, err := b.parseBody("else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if n.orElse, _, _, err = b.parseBody("endfor"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func parseSet(p *parser) (node, error) {
	t := p.next()
	if t.kind != 'n' {
		return nil, fmt.Errorf("expected a name, found %q", t.text)
	}
	n := setNode{name: t.text}
	if p.accept('o', ".") {
		a := p.next()
		if a.kind != 'n' {
			return nil, fmt.Errorf("expected an attribute name, found %q", a.text)
		}
		n.attr = a.text
	}
	if !p.accept('o', "=") {
		return nil, fmt.Errorf("block set ({%% set x %%}...{%% endset %%}): not supported")
	}
	x, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if !p.done() {
		return nil, fmt.Errorf("unexpected %q", p.peek().text)
	}
	n.x = x
	return n, nil
}

// globals are the functions every template sees, as transformers
// provides them.
func globals() map[string]any {
	return map[string]any{
		"raise_exception": function(func(args []any, _ map[string]any) (any, error) {
			msg := "raise_exception"
			if len(args) > 0 {
				msg = toString(args[0])
			}
			return nil, fmt.Errorf("template raised: %s", msg)
		}),
		"range": function(func(args []any, _ map[string]any) (any, error) {
			var lo, hi, step = 0, 0, 1
			ints := make([]int, len(args))
			for i, a := range args {
				n, ok := a.(int)
				if !ok {
					return nil, fmt.Errorf("range needs integers")
				}
				ints[i] = n
			}
			switch len(ints) {
			case 1:
				hi = ints[0]
			case 2:
				lo, hi = ints[0], ints[1]
			case 3:
				lo, hi, step = ints[0], ints[1], ints[2]
			default:
				return nil, fmt.Errorf("range needs 1 to 3 arguments")
			}
			if step == 0 {
				return nil, fmt.Errorf("range step cannot be zero")
			}
			var out []any
			for i := lo; (step > 0 && i < hi) || (step < 0 && i > hi); i += step {
				out = append(out, i)
			}
			return out, nil
		}),
		"namespace": function(func(_ []any, kw map[string]any) (any, error) {
			d := newDict()
			for _, k := range sortedKeys(kw) {
				d.set(k, kw[k])
			}
			return d, nil
		}),
		"strftime_now": function(func(args []any, _ map[string]any) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("strftime_now needs a format")
			}
			return strftime(time.Now(), toString(args[0])), nil
		}),
	}
}

// strftime formats t with the C directives chat templates use.
func strftime(t time.Time, format string) string {
	r := strings.NewReplacer("%d", t.Format("02"), "%b", t.Format("Jan"), "%B", t.Format("January"), "%Y", t.Format("2006"),
		"%m", t.Format("01"), "%y", t.Format("06"), "%H", t.Format("15"), "%M", t.Format("04"), "%S", t.Format("05"),
		"%a", t.Format("Mon"), "%A", t.Format("Monday"), "%%", "%")
	return r.Replace(format)
}
