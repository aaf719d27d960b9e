package rewards

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NoAnswer is the answer string the original uses for a completion with no
// extractable answer (spec §1.5); ExtractAnswer reports it as ok == false.
const NoAnswer = "NO_ANSWER_FOUND"

// ExtractAnswer returns the final answer of a completion (spec §1.5 step 1):
// the payload of the last \boxed{...} or \fbox{...} (braces matched, also the
// bare form `\boxed x` up to whitespace, Unicode's included, or one of
// ,;.!?), else the first <answer>...</answer> (tags in any case), trimmed of
// surrounding space.
// ok is false when there is none (an empty payload counts as none).
func ExtractAnswer(text string) (answer string, ok bool) {
	if a, ok := lastBoxed(text); ok {
		return a, true
	}
	start, n := indexFold(text, "<answer>")
	if start < 0 {
		return "", false
	}
	rest := text[start+n:]
	end, _ := indexFold(rest, "</answer>")
	if end < 0 {
		return "", false
	}
	a := strings.TrimSpace(rest[:end])
	return a, a != ""
}

// indexFold returns the byte offset and byte length of the first match of
// tag in s under Unicode case folding (the original matches the answer tags
// case-insensitively), or -1 and 0.
func indexFold(s, tag string) (int, int) {
	for i := range s {
		if n := prefixFold(s[i:], tag); n > 0 {
			return i, n
		}
	}
	return -1, 0
}

// prefixFold returns the byte length of the prefix of s that equals tag
// under Unicode case folding, or 0 when there is none.
func prefixFold(s, tag string) int {
	n := 0
	for _, want := range tag {
		r, size := utf8.DecodeRuneInString(s[n:])
		if size == 0 || !strings.EqualFold(string(r), string(want)) {
			return 0
		}
		n += size
	}
	return n
}

// lastBoxed scans \boxed and \fbox commands from the end of text and returns
// the first (i.e. last in the text) that has a non-empty payload.
func lastBoxed(text string) (string, bool) {
	end := len(text)
	for end > 0 {
		ib := strings.LastIndex(text[:end], `\boxed`)
		iff := strings.LastIndex(text[:end], `\fbox`)
		i, cmd := ib, len(`\boxed`)
		if iff > ib {
			i, cmd = iff, len(`\fbox`)
		}
		if i < 0 {
			return "", false
		}
		if a, ok := boxedPayload(text[i+cmd:]); ok {
			return a, true
		}
		end = i
	}
	return "", false
}

// boxedPayload reads the argument that follows a \boxed or \fbox command:
// a brace group, which may follow whitespace (`\boxed {7}` is 7, as in the
// original), else a bare word after a space.
func boxedPayload(s string) (string, bool) {
	if t := strings.TrimLeftFunc(s, unicode.IsSpace); strings.HasPrefix(t, "{") {
		depth := 0
		for i := 0; i < len(t); i++ {
			switch t[i] {
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					a := strings.TrimSpace(t[1:i])
					return a, a != ""
				}
			}
		}
		return "", false // unbalanced
	}
	if !strings.HasPrefix(s, " ") {
		return "", false // e.g. \boxedsomething: not a command
	}
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	end := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(",;.!?", r) })
	if end < 0 {
		end = len(s)
	}
	return s[:end], end > 0
}

// SemanticIDs groups the completions of one prompt by exact answer equality
// (spec §1.5 step 2): found answers get ids 0, 1, ... in first-seen order, and
// every missing answer (found[i] false) gets its own fresh id after those.
func SemanticIDs(answers []string, found []bool) ([]int, error) {
	if err := checkLen("found", len(found), len(answers)); err != nil {
		return nil, fmt.Errorf("semantic ids: %w", err)
	}
	ids := make([]int, len(answers))
	seen := make(map[string]int, len(answers))
	for i, a := range answers {
		if !found[i] {
			continue
		}
		id, ok := seen[a]
		if !ok {
			id = len(seen)
			seen[a] = id
		}
		ids[i] = id
	}
	next := len(seen)
	for i := range answers {
		if !found[i] {
			ids[i] = next
			next++
		}
	}
	return ids, nil
}

// SemanticEntropy returns the entropy of the cluster masses of one group
// (spec §1.5 step 4, Rao-style):
//
//	log p_c = LSE_{i∈c}(l_i) - LSE_all(l);   H = -Σ_c p_c · log p_c
//
// Completions with a NaN or +Inf log-likelihood are left out; fallback H = 0
// when none remains.
func SemanticEntropy(ids []int, logLik []float64) (float64, error) {
	if err := checkLen("logLik", len(logLik), len(ids)); err != nil {
		return 0, fmt.Errorf("semantic entropy: %w", err)
	}
	all := math.Inf(-1)
	cluster := make(map[int]float64, len(ids))
	for i, l := range logLik {
		if math.IsNaN(l) || math.IsInf(l, 1) {
			continue
		}
		all = logAddExp(all, l)
		c, ok := cluster[ids[i]]
		if !ok {
			c = math.Inf(-1)
		}
		cluster[ids[i]] = logAddExp(c, l)
	}
	if math.IsInf(all, -1) {
		return 0, nil
	}
	h := 0.0
	for _, lc := range cluster {
		lp := lc - all
		if p := math.Exp(lp); isFinite(lp) && p > 0 {
			h -= p * lp
		}
	}
	return h, nil
}

// logAddExp returns log(e^a + e^b) without overflow.
func logAddExp(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	if math.IsInf(b, -1) {
		return a
	}
	m := max(a, b)
	return m + math.Log(math.Exp(a-m)+math.Exp(b-m))
}

// SeedGRPO holds the SEED-GRPO settings (spec §1.5; config seed_grpo_*).
type SeedGRPO struct {
	// Enabled scales advantages by semantic entropy (default false; only with
	// a GRPO objective).
	Enabled bool
	// Alpha is the scaling strength, finite and >= 0 (default 0.0417).
	Alpha float64
	// NormalizeByMaxEntropy divides alpha by ln G (default true).
	NormalizeByMaxEntropy bool
	// LengthNormalizeLogprobs divides each log-likelihood by its token count
	// when the count is > 0 (default true).
	LengthNormalizeLogprobs bool
	// NumGenerations is G; 0 means the group size K.
	NumGenerations int
}

// DefaultSeedGRPO returns the original's SEED-GRPO defaults (disabled).
func DefaultSeedGRPO() SeedGRPO {
	return SeedGRPO{Alpha: 0.0417, NormalizeByMaxEntropy: true, LengthNormalizeLogprobs: true}
}

// AlphaEffective returns the alpha actually used (spec §1.5 step 5):
//
//	α_eff = α / ln G   if normalising and G > 1,   else α
func (s SeedGRPO) AlphaEffective(g int) float64 {
	if s.NormalizeByMaxEntropy && g > 1 {
		return s.Alpha / math.Log(float64(g))
	}
	return s.Alpha
}

// SeedScale returns the advantage scale of a group with semantic entropy h:
//
//	scale = 1 / (1 + α_eff · H)      (non-finite → 1)
func SeedScale(h, alphaEff float64) float64 {
	s := 1 / (1 + alphaEff*h)
	if !isFinite(s) {
		return 1
	}
	return s
}

// SeedStats are the per-group SEED-GRPO results of one batch.
type SeedStats struct {
	// Entropy is the semantic entropy H_g of every group [P].
	Entropy []float64
	// Scale is the advantage scale of every group [P].
	Scale []float64
	// AlphaEffective is α_eff.
	AlphaEffective float64
	// MaxPossibleEntropy is ln G, the entropy of G singleton clusters.
	MaxPossibleEntropy float64
}

// SeedScales computes the SEED-GRPO semantic entropies and advantage scales of
// every group (spec §1.5 steps 1–5). completions, logprobSums (behaviour
// log-prob sum per completion) and tokenCounts are [P*K]; tokenCounts may be
// nil when not length-normalising.
func SeedScales(completions []string, logprobSums []float64, tokenCounts []int, k int, cfg SeedGRPO) (SeedStats, error) {
	p, err := groupCount(len(completions), k)
	if err != nil {
		return SeedStats{}, fmt.Errorf("seed-grpo: %w", err)
	}
	if err := checkLen("logprob sums", len(logprobSums), len(completions)); err != nil {
		return SeedStats{}, fmt.Errorf("seed-grpo: %w", err)
	}
	if cfg.LengthNormalizeLogprobs && tokenCounts != nil {
		if err := checkLen("token counts", len(tokenCounts), len(completions)); err != nil {
			return SeedStats{}, fmt.Errorf("seed-grpo: %w", err)
		}
	}
	if !(cfg.Alpha >= 0) || math.IsInf(cfg.Alpha, 0) {
		return SeedStats{}, fmt.Errorf("seed-grpo: alpha %v must be finite and >= 0: %w", cfg.Alpha, ErrParam)
	}
	g := cfg.NumGenerations
	if g <= 0 {
		g = k
	}
	st := SeedStats{Entropy: make([]float64, p), Scale: make([]float64, p), AlphaEffective: cfg.AlphaEffective(g)}
	if g > 1 {
		st.MaxPossibleEntropy = math.Log(float64(g))
	}
	answers, found, ll := make([]string, k), make([]bool, k), make([]float64, k)
	for gi := range p {
		for j := range k {
			i := gi*k + j
			answers[j], found[j] = ExtractAnswer(completions[i])
			ll[j] = logprobSums[i]
			if cfg.LengthNormalizeLogprobs && tokenCounts != nil && tokenCounts[i] > 0 {
				ll[j] /= float64(tokenCounts[i])
			}
		}
		ids, err := SemanticIDs(answers, found)
		if err != nil {
			return SeedStats{}, fmt.Errorf("seed-grpo group %d: %w", gi, err)
		}
		h, err := SemanticEntropy(ids, ll)
		if err != nil {
			return SeedStats{}, fmt.Errorf("seed-grpo group %d: %w", gi, err)
		}
		st.Entropy[gi] = h
		st.Scale[gi] = SeedScale(h, st.AlphaEffective)
	}
	return st, nil
}
