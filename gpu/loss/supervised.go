package loss

import (
	"fmt"
	"math"
)

// Supervised is the warm-start loss, the token-mean negative log-likelihood
// of the completion tokens:
//
//	loss = Σ −lp·m / max(Σ m, 1),   ∂loss/∂lp = −m / max(Σ m, 1)
//
// Only N, T and Mask of b are used.
func Supervised(b Batch, lp []float64) (Result, error) {
	if err := b.check(lp); err != nil {
		return Result{}, fmt.Errorf("supervised loss: %w", err)
	}
	_, total := b.seqTokens()
	inv := 1 / math.Max(total, 1)
	res := Result{DLogp: make([]float64, b.N*b.T)}
	for k, m := range b.Mask {
		if m == 0 {
			continue
		}
		res.Loss -= inv * m * lp[k]
		res.DLogp[k] = -inv * m
	}
	res.Stats.Tokens = total
	res.Stats.PolicyLoss = res.Loss
	res.Stats.RatioMean, res.Stats.ISWeightMean = 1, 1
	return res, nil
}
