package rewards

import (
	"fmt"
	"math"
	"slices"
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
// (spec §3.1 completions/diversity/*, the original's
// _completion_diversity_metrics). Every value is computed per group and then
// averaged over all groups; a group without n-grams or pairs counts as 0.
type DiversityStats struct {
	// Distinct1 and Distinct2: unique n-grams / total n-grams over the
	// concatenated tokens of a group's completions (bigrams cross completion
	// boundaries), averaged over groups.
	Distinct1, Distinct2 float64
	// Jaccard: mean pairwise 1 - |A∩B|/|A∪B| of the token sets in a group
	// (0 for a pair of empty sets and for a group of one), averaged over groups.
	Jaccard float64
	// Distinct1Micro, Distinct2Micro and JaccardMicro are the group-size
	// weighted means of the same per-group values. Every group has K
	// completions, so they equal the plain means up to rounding.
	Distinct1Micro, Distinct2Micro, JaccardMicro float64
}

// Diversity returns the diversity statistics of completions given as token
// sequences (token ids, or strings.Fields words as the original's fallback),
// group-major with K per group. n-grams run over the concatenation of a
// group's completions, as in the original.
func Diversity[T comparable](completions [][]T, k int) (DiversityStats, error) {
	p, err := groupCount(len(completions), k)
	if err != nil {
		return DiversityStats{}, fmt.Errorf("diversity: %w", err)
	}
	var st DiversityStats
	var d1, d2, jac groupAverage
	for g := range p {
		grp := completions[g*k : (g+1)*k]
		all := slices.Concat(grp...)
		d1.add(distinctN(all, 1), float64(k))
		d2.add(distinctN(all, 2), float64(k))
		jac.add(jaccardDistance(grp), float64(k))
	}
	st.Distinct1, st.Distinct1Micro = d1.values()
	st.Distinct2, st.Distinct2Micro = d2.values()
	st.Jaccard, st.JaccardMicro = jac.values()
	return st, nil
}

// groupAverage accumulates per-group values for their plain mean and their
// group-size weighted (micro) mean, the original's _mean and _weighted_mean.
type groupAverage struct{ sum, weighted, weight, groups float64 }

func (a *groupAverage) add(v, size float64) {
	a.sum += v
	a.weighted += v * size
	a.weight += size
	a.groups++
}

// values returns the plain and the weighted mean (0 without groups or weight).
func (a *groupAverage) values() (mean, micro float64) {
	if a.groups > 0 {
		mean = a.sum / a.groups
	}
	if a.weight > 0 {
		micro = a.weighted / a.weight
	}
	return mean, micro
}

// ngram is an n-gram key for n <= 2.
type ngram[T comparable] struct{ a, b T }

// distinctN returns unique n-grams / total n-grams of tokens (n = 1 or 2),
// 0 when there is no n-gram.
func distinctN[T comparable](tokens []T, n int) float64 {
	total := len(tokens) - n + 1
	if total <= 0 {
		return 0
	}
	seen := make(map[ngram[T]]struct{}, total)
	for i := range total {
		key := ngram[T]{a: tokens[i]}
		if n == 2 {
			key.b = tokens[i+1]
		}
		seen[key] = struct{}{}
	}
	return float64(len(seen)) / float64(total)
}

// jaccardDistance returns the mean over pairs of 1 - |A∩B|/|A∪B| of the token
// sets of grp; a pair with an empty union counts 0, fewer than 2 sets give 0.
func jaccardDistance[T comparable](grp [][]T) float64 {
	sets := make([]map[T]struct{}, len(grp))
	for i, c := range grp {
		sets[i] = make(map[T]struct{}, len(c))
		for _, t := range c {
			sets[i][t] = struct{}{}
		}
	}
	sum, pairs := 0.0, 0
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
	if pairs == 0 {
		return 0
	}
	return sum / float64(pairs)
}
