package tasks

import (
	"math/rand/v2"
	"strconv"
)

// solveBudget bounds the operator applications one countdown search may
// try, so Solution stays fast for six numbers or an unreachable target.
const solveBudget = 1 << 20

// solver searches for an expression over a multiset of numbers, each used
// at most once, whose value is target.
type solver struct {
	rng    *rand.Rand
	target int64
	budget int
}

// item is a value built so far with the tree that computes it.
type item struct {
	val  int64
	tree *node
}

// solve returns one expression reaching target, searching pairs and
// operators in an order drawn from rng. Intermediate results follow the
// verifier's rules (exact integers, no overflow).
func solve(rng *rand.Rand, nums []int64, target int64) (string, bool) {
	items := make([]item, len(nums))
	for i, n := range nums {
		items[i] = item{val: n, tree: &node{val: n, text: strconv.FormatInt(n, 10)}}
	}
	s := &solver{rng: rng, target: target, budget: solveBudget}
	if t := s.search(items); t != nil {
		return t.String(), true
	}
	return "", false
}

// variants of combining a pair (a, b): a+b, a*b, a-b, b-a, a/b, b/a.
var variants = [6]struct {
	op   byte
	swap bool
}{{'+', false}, {'*', false}, {'-', false}, {'-', true}, {'/', false}, {'/', true}}

func (s *solver) search(items []item) *node {
	for _, it := range items {
		if it.val == s.target {
			return it.tree
		}
	}
	n := len(items)
	if n < 2 {
		return nil
	}
	pairs := make([][2]int, 0, n*(n-1)/2)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			pairs = append(pairs, [2]int{i, j})
		}
	}
	s.rng.Shuffle(len(pairs), func(a, b int) { pairs[a], pairs[b] = pairs[b], pairs[a] })
	next := make([]item, 0, n-1)
	for _, pr := range pairs {
		for _, k := range s.rng.Perm(len(variants)) {
			if s.budget <= 0 {
				return nil
			}
			s.budget--
			it, ok := s.combine(items[pr[0]], items[pr[1]], variants[k].op, variants[k].swap)
			if !ok {
				continue
			}
			next = next[:0]
			for m := range items {
				if m != pr[0] && m != pr[1] {
					next = append(next, items[m])
				}
			}
			if t := s.search(append(next, it)); t != nil {
				return t
			}
		}
	}
	return nil
}

// combine applies op to (a, b), or (b, a) when swap. Operands of + and *
// are written in a random order, so solutions vary in form too.
func (s *solver) combine(a, b item, op byte, swap bool) (item, bool) {
	if swap || ((op == '+' || op == '*') && s.rng.IntN(2) == 0) {
		a, b = b, a
	}
	v, ok := applyOp(op, a.val, b.val)
	if !ok {
		return item{}, false
	}
	return item{val: v, tree: &node{op: op, l: a.tree, r: b.tree}}, true
}
