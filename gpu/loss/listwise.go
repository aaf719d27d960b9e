package loss

import (
	"fmt"
	"math"
)

// neutralSpread is the weight spread at or below which a group counts as
// neutral (spec §1.9b item 2).
const neutralSpread = 1e-8

// Listwise is the listwise MaxEnt objective (spec §1.9b): a weighted
// cross-entropy between the target weights w and the policy's distribution
// renormalised over each group's K sampled completions.
//
//	S_i    = Σ_t lp·m  (÷ max(n_i, 1) if ListwiseLengthNormalize)
//	L_pol  = mean over active groups g of  −Σ_{i∈g} w_i · log_softmax_i(S_g)
//	L_clip = mean over active groups of −Σ_i min(ρ_i c_i, clamp(ρ_i, 1−ε, 1+ε_high) c_i)
//	         ρ_i = exp(clamp(S_i − S_old_i, ±5)),  c_i = w_i − baseline
//	loss   = ListwiseScale · (L_pol + ListwiseClipCoef · L_clip)
//
// A group is active unless ListwiseSkipZeroVariance is set and its weights
// are uniform (max − min ≤ 1e-8). No active group gives loss 0 and zero
// gradients. ∂loss/∂lp_t = ∂loss/∂S_i · m_t (÷ max(n_i, 1)), with
// ∂L_pol/∂S_i = (p_i·Σ_j w_j − w_i)/G_active, p = softmax(S_g).
// b needs GroupSize, Weights [N] and Mask; OldLogp only for the clip term
// and RefLogp only for Stats.KL (the KL is measured, not added).
func Listwise(cfg Config, b Batch, lp []float64) (Result, error) {
	if err := checkListwise(cfg, b, lp); err != nil {
		return Result{}, fmt.Errorf("listwise loss: %w", err)
	}
	n, total := b.seqTokens()
	s, sOld := seqLogp(b, lp, n, cfg.ListwiseLengthNormalize)
	k := b.GroupSize
	groups := b.N / k
	active := make([]bool, groups)
	nActive := 0
	for g := range groups {
		active[g] = !cfg.ListwiseSkipZeroVariance || spread(b.Weights[g*k:(g+1)*k]) > neutralSpread
		nActive += int(b2f(active[g]))
	}
	res := Result{DLogp: make([]float64, b.N*b.T)}
	st := &res.Stats
	st.Tokens, st.ActiveGroups = total, nActive
	st.KL = meanK3(b, lp)
	st.RatioMean, st.ISWeightMean = 1, 1
	if nActive == 0 {
		return res, nil
	}
	inv := 1 / float64(nActive)
	dS := make([]float64, b.N)
	var clipLoss, ratioSum float64
	for g := range groups {
		if !active[g] {
			continue
		}
		lo, hi := g*k, (g+1)*k
		st.PolicyLoss += inv * listCE(s[lo:hi], b.Weights[lo:hi], dS[lo:hi], inv)
		for i := lo; i < hi; i++ {
			ratioSum += math.Exp(math.Max(-LogRatioClamp, math.Min(LogRatioClamp, s[i]-sOld[i])))
		}
		if cfg.ListwiseClipCoef > 0 {
			clipLoss += inv * listClip(cfg, s[lo:hi], sOld[lo:hi], b.Weights[lo:hi], dS[lo:hi], inv*cfg.ListwiseClipCoef, st)
		}
	}
	st.ListwiseClipLoss = cfg.ListwiseClipCoef * clipLoss
	seqs := float64(nActive * k)
	st.RatioMean = ratioSum / seqs
	st.ClipLow /= seqs
	st.ClipHigh /= seqs
	st.ClipRegion = st.ClipLow + st.ClipHigh
	res.Loss = cfg.ListwiseScale * (st.PolicyLoss + st.ListwiseClipLoss)
	for i := range b.N {
		d := cfg.ListwiseScale * dS[i]
		if cfg.ListwiseLengthNormalize {
			d /= math.Max(n[i], 1)
		}
		for t := range b.T {
			idx := i*b.T + t
			res.DLogp[idx] = d * b.Mask[idx]
		}
	}
	return res, nil
}

// listCE returns −Σ w_i log_softmax_i(s) and adds scale·∂/∂s_i to dS.
func listCE(s, w, dS []float64, scale float64) float64 {
	mx := math.Inf(-1)
	for _, v := range s {
		mx = math.Max(mx, v)
	}
	var z, sumW float64
	for i, v := range s {
		z += math.Exp(v - mx)
		sumW += w[i]
	}
	lse := mx + math.Log(z)
	var l float64
	for i, v := range s {
		l -= w[i] * (v - lse)
		dS[i] += scale * (math.Exp(v-lse)*sumW - w[i])
	}
	return l
}

// listClip returns the group's clip term −Σ min(ρc, clamp(ρ)c), adds
// scale·∂/∂s_i to dS and counts clipped sequences into st.
func listClip(cfg Config, s, sOld, w, dS []float64, scale float64, st *Stats) float64 {
	epsLow, epsHigh := cfg.Epsilon, cfg.epsHigh()
	if cfg.ListwiseClipRange > 0 {
		epsLow, epsHigh = cfg.ListwiseClipRange, cfg.ListwiseClipRange
	}
	base := cfg.ListwiseClipBaseline
	if base < 0 {
		base = 1 / float64(len(s))
	}
	var l float64
	for i := range s {
		rho, drho := ratio(s[i], sOld[i])
		rc, g := clampGrad(rho, 1-epsLow, 1+epsHigh)
		c := w[i] - base
		m, da, db := minGrad(rho*c, rc*c)
		l -= m
		dS[i] -= scale * c * (da*drho + db*g*drho)
		st.ClipLow += b2f(rho < 1-epsLow && c < 0)
		st.ClipHigh += b2f(rho > 1+epsHigh && c > 0)
	}
	return l
}

// seqLogp returns S_i and S_old_i (S_old = S when OldLogp is nil).
func seqLogp(b Batch, lp, n []float64, normalize bool) (s, sOld []float64) {
	s, sOld = make([]float64, b.N), make([]float64, b.N)
	for k, m := range b.Mask {
		if m == 0 {
			continue
		}
		s[k/b.T] += m * lp[k]
		sOld[k/b.T] += m * b.old(lp, k)
	}
	if normalize {
		for i := range s {
			s[i] /= math.Max(n[i], 1)
			sOld[i] /= math.Max(n[i], 1)
		}
	}
	return s, sOld
}

// spread is max − min of w.
func spread(w []float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range w {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return hi - lo
}

// checkListwise validates the listwise inputs.
func checkListwise(cfg Config, b Batch, lp []float64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := b.check(lp); err != nil {
		return err
	}
	switch {
	case b.GroupSize <= 0 || b.N%b.GroupSize != 0:
		return fmt.Errorf("%w: GroupSize=%d must be positive and divide N=%d", ErrShape, b.GroupSize, b.N)
	case len(b.Weights) != b.N:
		return fmt.Errorf("%w: len(Weights)=%d, want N=%d", ErrShape, len(b.Weights), b.N)
	}
	return nil
}
