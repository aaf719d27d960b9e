package gpu

import (
	"slices"
	"testing"
)

// TestPlanRows: the plan of a grouped batch has one need row per
// completion token, in token order, whose target is that token, whose
// slot is its place in the Batch layout (counted from the batch's first
// sequence), and which is the row completionRow names; a group's later
// sequences read the shared positions from its first's rows. Replanning
// into the same buffers (shorter, then longer) gives the same plan.
func TestPlanRows(t *testing.T) {
	seqs := groupedSeqs(11)
	const first, width = 2, 7
	var p rowPlan
	planRows(&p, seqs[:3], 0, 3, false)
	planRows(&p, seqs, first, width, true)
	var want []int32
	for i, s := range seqs {
		for j, id := range s.Completion {
			k := len(want)
			want = append(want, int32((first+i)*width+j))
			if r := p.completionRow(i, s, j); k >= len(p.rows) || int(p.rows[k]) != r || int(p.targets[r]) != id || !p.need[r] {
				t.Fatalf("sequence %d token %d: need row %d of %v, completionRow %d, target %d", i, j, k, p.rows, r, p.targets[r])
			}
		}
	}
	if !slices.Equal(p.slots, want) {
		t.Errorf("slots %v, want %v", p.slots, want)
	}
	if n := int(p.start[len(seqs)]); n != len(p.tokens) || n != 6+1+4+0+5+2+3+6+2 {
		t.Errorf("%d rows (start[B] %d), want 29", len(p.tokens), n)
	}
	// seqs[1] and seqs[2] share seqs[0]'s prompt of 4 tokens: 3 positions.
	if p.pre[1] != 3 || p.from[1] != p.start[0] || p.pre[2] != 3 || p.pre[5] != 0 || p.pre[6] != 0 {
		t.Errorf("pre %v from %v", p.pre, p.from)
	}
	var again rowPlan
	planRows(&again, seqs, first, width, true)
	if !slices.Equal(again.tokens, p.tokens) || !slices.Equal(again.pos, p.pos) || !slices.Equal(again.slots, p.slots) || !slices.Equal(again.start, p.start) {
		t.Error("a plan into reused buffers differs from a fresh one")
	}
}

// TestTokenScores: per-token arrays of the Batch layout become each
// sequence's scores, slots past its completion dropped.
func TestTokenScores(t *testing.T) {
	seqs := []Sequence{{Prompt: []int{1}, Completion: []int{5, 6}}, {Prompt: []int{1}}, {Prompt: []int{1}, Completion: []int{7, 8, 9}}}
	lp := []float64{-1, -2, 0, 0, 0, 0, -3, -4, -5}
	ent := []float64{1, 2, 0, 0, 0, 0, 3, 4, 5}
	got := tokenScores(seqs, 3, lp, ent)
	if !slices.Equal(got[0].LogProbs, []float64{-1, -2}) || len(got[1].LogProbs) != 0 || !slices.Equal(got[2].Entropies, []float64{3, 4, 5}) {
		t.Errorf("scores %+v", got)
	}
}
