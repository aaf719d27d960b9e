package tasks

import (
	"errors"
	"math"
	"strings"
)

// Limits that keep the countdown verifier fast on any input. A completion
// beyond them is Malformed.
const (
	// MaxExprLen is the longest countdown completion accepted, in bytes
	// after trimming surrounding spaces.
	MaxExprLen = 256
	// MaxExprDepth is the deepest parenthesis nesting accepted.
	MaxExprDepth = 32
	// maxLiteralDigits: longer literals are kept but marked huge (they
	// cannot be a countdown number, so the expression is Wrong).
	maxLiteralDigits = 18
)

// errParse is the one parse failure; its detail never reaches a caller.
var errParse = errors.New("tasks: malformed expression")

// node is an expression tree: a literal (op == 0) or a binary operation.
type node struct {
	op   byte  // 0 for a literal, else one of + - * /
	val  int64 // literal value (op == 0 and !huge)
	huge bool  // literal longer than maxLiteralDigits
	text string
	l, r *node
}

// parseExpr parses an integer arithmetic expression over + - * / and
// parentheses, with spaces allowed between tokens and no unary operators.
// Literals are decimal integers without leading zeros.
func parseExpr(s string) (*node, error) {
	if len(s) > MaxExprLen {
		return nil, errParse
	}
	p := &parser{s: s}
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return nil, errParse
	}
	return n, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	p.skipSpace()
	if p.i == len(p.s) {
		return 0
	}
	return p.s[p.i]
}

// expr := term (('+'|'-') term)*
func (p *parser) expr(depth int) (*node, error) {
	left, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for c := p.peek(); c == '+' || c == '-'; c = p.peek() {
		p.i++
		right, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		left = &node{op: c, l: left, r: right}
	}
	return left, nil
}

// term := factor (('*'|'/') factor)*
func (p *parser) term(depth int) (*node, error) {
	left, err := p.factor(depth)
	if err != nil {
		return nil, err
	}
	for c := p.peek(); c == '*' || c == '/'; c = p.peek() {
		p.i++
		right, err := p.factor(depth)
		if err != nil {
			return nil, err
		}
		left = &node{op: c, l: left, r: right}
	}
	return left, nil
}

// factor := literal | '(' expr ')'
func (p *parser) factor(depth int) (*node, error) {
	c := p.peek()
	if c == '(' {
		if depth >= MaxExprDepth {
			return nil, errParse
		}
		p.i++
		n, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, errParse
		}
		p.i++
		return n, nil
	}
	return p.literal()
}

func (p *parser) literal() (*node, error) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	text := p.s[start:p.i]
	if text == "" || (len(text) > 1 && text[0] == '0') {
		return nil, errParse
	}
	if len(text) > maxLiteralDigits {
		return &node{huge: true, text: text}, nil
	}
	var v int64
	for i := 0; i < len(text); i++ {
		v = v*10 + int64(text[i]-'0')
	}
	return &node{val: v, text: text}, nil
}

// literals appends the tree's literals to dst, left to right.
func (n *node) literals(dst []*node) []*node {
	if n.op == 0 {
		return append(dst, n)
	}
	return n.r.literals(n.l.literals(dst))
}

// eval evaluates the tree in exact integer arithmetic. ok is false on a
// huge literal, overflow, division by zero or a division with a remainder.
func (n *node) eval() (v int64, ok bool) {
	if n.op == 0 {
		return n.val, !n.huge
	}
	a, ok := n.l.eval()
	if !ok {
		return 0, false
	}
	b, ok := n.r.eval()
	if !ok {
		return 0, false
	}
	return applyOp(n.op, a, b)
}

// applyOp applies one operator in exact int64 arithmetic.
func applyOp(op byte, a, b int64) (int64, bool) {
	switch op {
	case '+':
		s := a + b
		return s, (s > a) == (b > 0)
	case '-':
		d := a - b
		return d, (d < a) == (b > 0)
	case '*':
		if a == 0 || b == 0 {
			return 0, true
		}
		if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return 0, false
		}
		m := a * b
		return m, m/b == a
	case '/':
		if b == 0 || a%b != 0 || (a == math.MinInt64 && b == -1) {
			return 0, false
		}
		return a / b, true
	}
	return 0, false
}

// precedence of a node: literals bind tightest.
func (n *node) precedence() int {
	switch n.op {
	case '+', '-':
		return 1
	case '*', '/':
		return 2
	}
	return 3
}

// String prints the tree with the fewest parentheses that parse back to
// the same tree: operators are left-associative, so a right operand of
// equal precedence keeps its parentheses.
func (n *node) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *node) write(b *strings.Builder) {
	if n.op == 0 {
		b.WriteString(n.text)
		return
	}
	p := n.precedence()
	writeOperand(b, n.l, n.l.precedence() < p)
	b.WriteByte(n.op)
	writeOperand(b, n.r, n.r.precedence() <= p)
}

func writeOperand(b *strings.Builder, n *node, parens bool) {
	if parens {
		b.WriteByte('(')
	}
	n.write(b)
	if parens {
		b.WriteByte(')')
	}
}
