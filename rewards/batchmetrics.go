package rewards

import (
	"fmt"
	"math"
)

// LengthStats summarise completion lengths in tokens (spec §3.1 lengths block).
type LengthStats struct {
	// MeanSampled, MinSampled and MaxSampled are over all completions.
	MeanSampled, MinSampled, MaxSampled float64
	// ClippedFrac is the fraction of truncated completions, in [0, 1].
	ClippedFrac float64
	// MeanTerminated, MinTerminated and MaxTerminated are over completions
	// that ended on their own (0 when there are none).
	MeanTerminated, MinTerminated, MaxTerminated float64
}

// CompletionLengths returns the length statistics of a batch; truncated marks
// completions cut by the length cap (see TruncatedByLength). An empty batch
// gives zero statistics.
func CompletionLengths(tokenCounts []int, truncated []bool) (LengthStats, error) {
	if err := checkLen("truncated", len(truncated), len(tokenCounts)); err != nil {
		return LengthStats{}, fmt.Errorf("completion lengths: %w", err)
	}
	var st LengthStats
	if len(tokenCounts) == 0 {
		return st, nil
	}
	st.MeanSampled, st.MinSampled, st.MaxSampled = lengthMoments(tokenCounts, nil)
	st.MeanTerminated, st.MinTerminated, st.MaxTerminated = lengthMoments(tokenCounts, truncated)
	st.ClippedFrac = min(max(FractionTrue(truncated), 0), 1)
	return st, nil
}

// lengthMoments returns mean, min and max of counts[i] where skip[i] is false
// (skip may be nil); zeros when nothing is left.
func lengthMoments(counts []int, skip []bool) (mean, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	n := 0
	for i, c := range counts {
		if skip != nil && skip[i] {
			continue
		}
		v := float64(c)
		mean += v
		lo, hi = min(lo, v), max(hi, v)
		n++
	}
	if n == 0 {
		return 0, 0, 0
	}
	return mean / float64(n), lo, hi
}

// DiversityStats measure how different the completions of a group are
// (spec §3.1 completions/diversity/*). Macro values average per-group values
// over groups that have any n-gram (pair); micro values pool the counts of all
// groups (n-grams for distinct-n, pairs for Jaccard).
type DiversityStats struct {
	// Distinct1 and Distinct2: unique n-grams / total n-grams in a group.
	Distinct1, Distinct2 float64
	// Jaccard: mean pairwise 1 - |A∩B|/|A∪B| of the token sets in a group.
	Jaccard float64
	// Distinct1Micro, Distinct2Micro and JaccardMicro are the pooled forms.
	Distinct1Micro, Distinct2Micro, JaccardMicro float64
}

// Diversity returns the diversity statistics of completions given as token
// sequences (token ids, or strings.Fields words as the original's fallback),
// group-major with K per group. n-grams do not cross completion boundaries.
func Diversity[T comparable](completions [][]T, k int) (DiversityStats, error) {
	p, err := groupCount(len(completions), k)
	if err != nil {
		return DiversityStats{}, fmt.Errorf("diversity: %w", err)
	}
	var st DiversityStats
	var d1, d2, jac macroMicro
	for g := range p {
		grp := completions[g*k : (g+1)*k]
		u1, n1 := distinct(grp, 1)
		u2, n2 := distinct(grp, 2)
		d1.add(float64(u1), float64(n1))
		d2.add(float64(u2), float64(n2))
		dist, pairs := jaccardSum(grp)
		jac.add(dist, float64(pairs))
	}
	st.Distinct1, st.Distinct1Micro = d1.values()
	st.Distinct2, st.Distinct2Micro = d2.values()
	st.Jaccard, st.JaccardMicro = jac.values()
	return st, nil
}

// macroMicro accumulates ratios num/den per group (macro) and pooled (micro).
type macroMicro struct{ sumRatio, groups, num, den float64 }

func (m *macroMicro) add(num, den float64) {
	if den <= 0 {
		return
	}
	m.sumRatio += num / den
	m.groups++
	m.num += num
	m.den += den
}

func (m *macroMicro) values() (macro, micro float64) {
	if m.groups == 0 {
		return 0, 0
	}
	return m.sumRatio / m.groups, m.num / m.den
}

// ngram is an n-gram key for n <= 2.
type ngram[T comparable] struct{ a, b T }

// distinct returns the unique and total n-gram counts (n = 1 or 2) of a group.
func distinct[T comparable](grp [][]T, n int) (unique, total int) {
	seen := make(map[ngram[T]]struct{})
	for _, c := range grp {
		for i := 0; i+n <= len(c); i++ {
			key := ngram[T]{a: c[i]}
			if n == 2 {
				key.b = c[i+1]
			}
			seen[key] = struct{}{}
			total++
		}
	}
	return len(seen), total
}

// jaccardSum returns Σ over pairs of 1 - |A∩B|/|A∪B| and the pair count.
func jaccardSum[T comparable](grp [][]T) (sum float64, pairs int) {
	sets := make([]map[T]struct{}, len(grp))
	for i, c := range grp {
		sets[i] = make(map[T]struct{}, len(c))
		for _, t := range c {
			sets[i][t] = struct{}{}
		}
	}
	for i := range sets {
		for j := i + 1; j < len(sets); j++ {
			inter := 0
			for t := range sets[i] {
				if _, ok := sets[j][t]; ok {
					inter++
				}
			}
			if union := len(sets[i]) + len(sets[j]) - inter; union > 0 {
				sum += 1 - float64(inter)/float64(union)
			}
			pairs++
		}
	}
	return sum, pairs
}
