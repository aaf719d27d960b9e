package loss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Clip edges used by the gradient checks; random inputs are kept 1e-4 away
// from every non-differentiable point so central differences are valid.
const (
	gcEps, gcEpsHigh, gcDelta = 0.2, 0.28, 1.5
	gcMargin                  = 1e-4
)

// randomBatch returns a batch with random lengths, log-probs, old,
// behaviour and reference log-probs, advantages, group weights, and
// entropies. Padding positions hold -Inf log-probs (they must be ignored).
func randomBatch(rng *rand.Rand, n, t, k int) (Batch, []float64, []float64) {
	for {
		b, lp, h := drawBatch(rng, n, t, k)
		if smoothAt(b, lp) {
			return b, lp, h
		}
	}
}

func drawBatch(rng *rand.Rand, n, t, k int) (Batch, []float64, []float64) {
	u := func(lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }
	b := Batch{N: n, T: t, GroupSize: k,
		Mask: make([]float64, n*t), OldLogp: make([]float64, n*t), BehaviourLogp: make([]float64, n*t),
		RefLogp: make([]float64, n*t), Advantages: make([]float64, n), Weights: make([]float64, n)}
	lp, h := make([]float64, n*t), make([]float64, n*t)
	for i := range n {
		length := 1 + rng.IntN(t)
		b.Advantages[i] = rng.NormFloat64()
		for j := range t {
			idx := i*t + j
			if j >= length {
				lp[idx], b.OldLogp[idx], b.RefLogp[idx] = math.Inf(-1), 7, 9
				continue
			}
			b.Mask[idx] = 1
			lp[idx] = u(-3, -0.05)
			b.OldLogp[idx] = lp[idx] + u(-0.35, 0.35)
			b.BehaviourLogp[idx] = b.OldLogp[idx] + u(-0.8, 0.8)
			b.RefLogp[idx] = lp[idx] + u(-1, 1)
			h[idx] = u(0.1, 3)
		}
	}
	for g := 0; g < n/k; g++ {
		var sum float64
		for i := g * k; i < (g+1)*k; i++ {
			b.Weights[i] = u(0.05, 1)
			sum += b.Weights[i]
		}
		for i := g * k; i < (g+1)*k; i++ {
			b.Weights[i] /= sum
		}
	}
	return b, lp, h
}

// smoothAt reports whether every ratio (token, GSPO sequence, listwise
// sequence with and without length normalisation) is away from the clip
// and cap edges.
func smoothAt(b Batch, lp []float64) bool {
	edges := []float64{1 - gcEps, 1 + gcEps, 1 + gcEpsHigh, gcDelta}
	away := func(r float64) bool {
		for _, e := range edges {
			if math.Abs(r-e) < gcMargin {
				return false
			}
		}
		return true
	}
	for i := range b.N {
		var sum, n float64
		for j := range b.T {
			k := i*b.T + j
			if b.Mask[k] == 0 {
				continue
			}
			if !away(math.Exp(lp[k] - b.OldLogp[k])) {
				return false
			}
			sum += lp[k] - b.OldLogp[k]
			n++
		}
		if !away(math.Exp(sum/n)) || !away(math.Exp(sum)) {
			return false
		}
	}
	return true
}

// checkGrad compares grad with central differences of f around x at the
// positions where mask is 1, and requires grad = 0 elsewhere.
func checkGrad(t *testing.T, name string, f func([]float64) float64, x, mask, grad []float64) {
	t.Helper()
	const h = 1e-6
	worst := 0.0
	for k := range x {
		if mask[k] == 0 {
			if grad[k] != 0 {
				t.Errorf("%s: padding position %d has gradient %v", name, k, grad[k])
			}
			continue
		}
		xp := append([]float64(nil), x...)
		xm := append([]float64(nil), x...)
		xp[k] += h
		xm[k] -= h
		fd := (f(xp) - f(xm)) / (2 * h)
		scale := math.Max(math.Abs(fd), math.Abs(grad[k]))
		if scale < 1e-9 { // both zero (clipped): nothing relative to compare
			continue
		}
		rel := math.Abs(fd-grad[k]) / scale
		worst = math.Max(worst, rel)
		if rel > 1e-6 {
			t.Errorf("%s: position %d: analytic %v, finite difference %v (rel err %.2g)", name, k, grad[k], fd, rel)
		}
	}
	t.Logf("%s: worst relative error %.2g", name, worst)
}

// detachedShift moves OldLogp and BehaviourLogp with lp (by x − lp), so a
// finite difference holds the ratio and IS weight fixed: it then sees CISPO's
// detached factors as constants, as autograd does.
func detachedShift(b Batch, lp, x []float64) Batch {
	b.OldLogp = append([]float64(nil), b.OldLogp...)
	b.BehaviourLogp = append([]float64(nil), b.BehaviourLogp...)
	for k := range x {
		if b.Mask[k] != 0 {
			b.OldLogp[k] += x[k] - lp[k]
			b.BehaviourLogp[k] += x[k] - lp[k]
		}
	}
	return b
}

func gcConfig(modify func(*Config)) Config {
	c := Default()
	c.Epsilon, c.EpsilonHigh, c.Beta, c.ISTruncation = gcEps, gcEpsHigh, 0.1, 1.5
	if modify != nil {
		modify(&c)
	}
	return c
}

func TestGradCheckPolicy(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	type variant struct {
		name string
		cfg  Config
	}
	var variants []variant
	for _, pol := range []string{PolicyVanilla, PolicyCISPO, PolicyGSPO} {
		for _, typ := range []string{TypeGRPO, TypeBNPO, TypeDrGRPO} {
			variants = append(variants, variant{pol + "/" + typ, gcConfig(func(c *Config) { c.Policy, c.Type = pol, typ })})
		}
	}
	variants = append(variants,
		variant{"vanilla/dr_grpo active", gcConfig(func(c *Config) { c.Type, c.DrGRPODenominator = TypeDrGRPO, DenomActiveTokens })},
		variant{"vanilla/delta", gcConfig(func(c *Config) { c.Delta = gcDelta })},
		variant{"vanilla/no IS no KL", gcConfig(func(c *Config) { c.Beta, c.ISTruncation = 0, 0 })},
	)
	for _, v := range variants {
		for trial := range 3 {
			b, lp, _ := randomBatch(rng, 4, 6, 2)
			res, err := Policy(v.cfg, b, lp)
			if err != nil {
				t.Fatal(err)
			}
			f := func(x []float64) float64 {
				bx := b
				if v.cfg.Policy == PolicyCISPO {
					bx = detachedShift(b, lp, x)
				}
				r, err := Policy(v.cfg, bx, x)
				if err != nil {
					t.Fatal(err)
				}
				return r.Loss
			}
			checkGrad(t, fmt.Sprintf("%s #%d", v.name, trial), f, lp, b.Mask, res.DLogp)
		}
	}
}

func TestGradCheckListwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	variants := []struct {
		name string
		cfg  Config
	}{
		{"plain", Default()},
		{"clip+scale+lengthnorm", gcConfig(func(c *Config) {
			c.ListwiseClipCoef, c.ListwiseScale, c.ListwiseLengthNormalize = 0.7, 0.5, true
		})},
		{"clip baseline 0.3", gcConfig(func(c *Config) { c.ListwiseClipCoef, c.ListwiseClipBaseline = 1, 0.3 })},
	}
	for _, v := range variants {
		for trial := range 3 {
			b, lp, _ := randomBatch(rng, 6, 5, 3)
			res, err := Listwise(v.cfg, b, lp)
			if err != nil {
				t.Fatal(err)
			}
			f := func(x []float64) float64 {
				r, err := Listwise(v.cfg, b, x)
				if err != nil {
					t.Fatal(err)
				}
				return r.Loss
			}
			checkGrad(t, fmt.Sprintf("listwise %s #%d", v.name, trial), f, lp, b.Mask, res.DLogp)
		}
	}
}

func TestGradCheckEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []string{TypeGRPO, TypeBNPO, TypeDrGRPO} {
		cfg := gcConfig(func(c *Config) { c.Type = typ })
		b, lp, h := randomBatch(rng, 4, 6, 2)
		res, err := MaxEntEntropy(cfg, b, lp, h, 0.3, 98)
		if err != nil {
			t.Fatal(err)
		}
		fLp := func(x []float64) float64 {
			r, _ := MaxEntEntropy(cfg, b, x, h, 0.3, 98)
			return r.Loss
		}
		fH := func(x []float64) float64 {
			r, _ := MaxEntEntropy(cfg, b, lp, x, 0.3, 98)
			return r.Loss
		}
		checkGrad(t, "entropy "+typ+" DLogp", fLp, lp, b.Mask, res.DLogp)
		checkGrad(t, "entropy "+typ+" DEntropy", fH, h, b.Mask, res.DEntropy)
	}
}

func TestGradCheckSupervised(t *testing.T) {
	b, lp, _ := randomBatch(rand.New(rand.NewPCG(41, 42)), 3, 4, 1)
	res, err := Supervised(b, lp)
	if err != nil {
		t.Fatal(err)
	}
	f := func(x []float64) float64 { r, _ := Supervised(b, x); return r.Loss }
	checkGrad(t, "supervised", f, lp, b.Mask, res.DLogp)
}

// BenchmarkLoss runs each loss over a 128 × 32 batch (B = 128 sequences,
// 32 completion tokens, DESIGN §6).
func BenchmarkLoss(b *testing.B) {
	batch, lp, h := drawBatch(rand.New(rand.NewPCG(1, 1)), 128, 32, 8)
	cfg := gcConfig(nil)
	cases := []struct {
		name string
		run  func() (Result, error)
	}{
		{"grpo", func() (Result, error) { return GRPO(cfg, batch, lp) }},
		{"gspo", func() (Result, error) { return GSPO(cfg, batch, lp) }},
		{"cispo", func() (Result, error) { return CISPO(cfg, batch, lp) }},
		{"maxent_entropy", func() (Result, error) { return MaxEntEntropy(cfg, batch, lp, h, 0.01, 98) }},
		{"listwise", func() (Result, error) { return Listwise(cfg, batch, lp) }},
	}
	for _, c := range cases {
		b.Run("loss="+c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(128*32)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
