package rewards

import (
	"fmt"
	"math"
)

// EntropyBonus is the reward-side policy-entropy bonus of objective
// grpo_entropy_bonus for one batch (spec §1.6).
type EntropyBonus struct {
	// PerToken is the policy entropy per token h_i of every completion [P*K].
	PerToken []float64
	// ZScore is h_i standardised within its group [P*K].
	ZScore []float64
	// Bonus is the amount added to every utility [P*K].
	Bonus []float64
	// Scale is σ_R, the batch reward std the bonus is measured in.
	Scale float64
}

// PolicyEntropyBonus computes the reward-side entropy bonus (spec §1.6; the
// original's live trainer skipped it, mgrpo applies it, DESIGN §3):
//
//	h_i = Hsum_i / max(T_i, 1)
//	z_i = (h_i - mean_g h) / max(stdPop_g h, 1e-6)
//	bonus_i = c · σ_R · z_i        σ_R = stdPop(u), or 1 if not > 0
//
// u are the utilities before the bonus, entropySums the summed per-token
// policy entropies and tokenCounts the completion lengths, all [P*K]. The
// caller adds Bonus to u and recomputes moments, advantages and q.
func PolicyEntropyBonus(u, entropySums []float64, tokenCounts []int, k int, coef float64) (EntropyBonus, error) {
	p, err := groupCount(len(u), k)
	if err != nil {
		return EntropyBonus{}, fmt.Errorf("entropy bonus: %w", err)
	}
	if err := checkLen("entropy sums", len(entropySums), len(u)); err != nil {
		return EntropyBonus{}, fmt.Errorf("entropy bonus: %w", err)
	}
	if err := checkLen("token counts", len(tokenCounts), len(u)); err != nil {
		return EntropyBonus{}, fmt.Errorf("entropy bonus: %w", err)
	}
	if err := checkFinite("entropy sums", entropySums); err != nil {
		return EntropyBonus{}, fmt.Errorf("entropy bonus: %w", err)
	}
	if !isFinite(coef) || coef < 0 {
		return EntropyBonus{}, fmt.Errorf("entropy bonus: coefficient %v must be finite and >= 0: %w", coef, ErrParam)
	}
	b := EntropyBonus{
		PerToken: make([]float64, len(u)),
		ZScore:   make([]float64, len(u)),
		Bonus:    make([]float64, len(u)),
		Scale:    stdPop(u),
	}
	if !(b.Scale > 0) || math.IsInf(b.Scale, 0) {
		b.Scale = 1
	}
	for i, h := range entropySums {
		b.PerToken[i] = h / float64(max(tokenCounts[i], 1))
	}
	for g := range p {
		row := b.PerToken[g*k : (g+1)*k]
		m := meanFinite(row)
		sd := max(stdPop(row), 1e-6)
		for j, h := range row {
			i := g*k + j
			b.ZScore[i] = (h - m) / sd
			b.Bonus[i] = coef * b.Scale * b.ZScore[i]
		}
	}
	return b, nil
}
