package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// ErrConfig is wrapped by every hyper-parameter validation error.
var ErrConfig = errors.New("optim: invalid setting")

// Param is one named parameter tensor, flattened, with its gradient.
type Param struct {
	// Name is the tensor name (as in model.safetensors); it keys the state.
	Name string
	// W holds the weights; Step updates it in place.
	W []float32
	// G holds dLoss/dW, len(G) == len(W); ClipGlobalNorm scales it in place.
	G []float32
	// NoDecay turns weight decay off for this tensor. Callers set it for 1-D
	// tensors (RMSNorm weights); matrices, embeddings included, decay.
	NoDecay bool
}

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter), matching
// torch.optim.AdamW (amsgrad off, maximize off). For step t = 1, 2, ...:
//
//	w ← w − lr·wd·w                       (skipped when Param.NoDecay)
//	m ← β1·m + (1−β1)·g
//	v ← β2·v + (1−β2)·g²
//	w ← w − lr/(1−β1^t) · m / (√v/√(1−β2^t) + eps)
//
// Moments are float32 and keyed by parameter name. An AdamW is not safe for
// concurrent use.
type AdamW struct {
	// LR is the configured base learning rate. Step uses the lr it is given
	// (from a Schedule); LR is recorded in the saved state.
	LR float64
	// Beta1 is the first-moment decay, in [0, 1); PyTorch default 0.9.
	Beta1 float64
	// Beta2 is the second-moment decay, in [0, 1); PyTorch default 0.999.
	Beta2 float64
	// Eps is added to the bias-corrected √v; PyTorch default 1e-8.
	Eps float64
	// WeightDecay is the decoupled decay coefficient; PyTorch default 0.01.
	WeightDecay float64
	// Workers is the number of goroutines Step splits the elements over
	// (≤ 1: the caller's alone); the result does not depend on it.
	Workers int

	step  int
	state []moments // parallel to the params of every Step
}

// moments is the Adam state of one parameter.
type moments struct {
	name string
	m, v []float32 // exp_avg, exp_avg_sq
}

// NewAdamW returns an AdamW after validating its hyper-parameters; the
// error names the first bad one.
func NewAdamW(lr, beta1, beta2, eps, weightDecay float64) (*AdamW, error) {
	o := &AdamW{LR: lr, Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// Validate checks the hyper-parameters.
func (o *AdamW) Validate() error {
	switch {
	case !(o.LR >= 0) || math.IsInf(o.LR, 0):
		return fmt.Errorf("%w: lr = %v: must be finite and >= 0", ErrConfig, o.LR)
	case !(o.Beta1 >= 0 && o.Beta1 < 1):
		return fmt.Errorf("%w: beta1 = %v: must be in [0, 1)", ErrConfig, o.Beta1)
	case !(o.Beta2 >= 0 && o.Beta2 < 1):
		return fmt.Errorf("%w: beta2 = %v: must be in [0, 1)", ErrConfig, o.Beta2)
	case !(o.Eps > 0) || math.IsInf(o.Eps, 0):
		return fmt.Errorf("%w: eps = %v: must be finite and > 0", ErrConfig, o.Eps)
	case !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0):
		return fmt.Errorf("%w: weight_decay = %v: must be finite and >= 0", ErrConfig, o.WeightDecay)
	}
	return nil
}

// StepCount returns how many steps have been taken (t of the last step).
func (o *AdamW) StepCount() int { return o.step }

// Step applies one AdamW update with learning rate lr to every parameter.
// The params must be the same names, order and sizes at every call (it
// panics otherwise: a programming error). With Workers ≤ 1 it allocates
// only on the first call; with more, also its goroutines.
func (o *AdamW) Step(params []Param, lr float64) {
	o.bind(params)
	o.step++
	k := o.coeffs(o.step, lr)
	if o.Workers <= 1 {
		for i, p := range params {
			o.update(p, i, 0, len(p.W), k)
		}
		return
	}
	split(params, o.Workers, func(_, i, lo, hi int) { o.update(params[i], i, lo, hi, k) })
}

// update runs the kernel on elements lo..hi-1 of p, the i-th parameter.
func (o *AdamW) update(p Param, i, lo, hi int, k coeffs) {
	st := &o.state[i]
	vec.AdamW(p.W[lo:hi], p.G[lo:hi], st.m[lo:hi], st.v[lo:hi], forParam(k, p))
}

// Update describes the change a Step would make (see Preview).
type Update struct {
	Norm       float64 // ‖Δw‖ over every parameter
	WeightNorm float64 // ‖w‖ before the step
}

// Preview computes the update Step(params, lr) would make, with the same
// arithmetic, and changes nothing: weights, moments and step count stay as
// they are. It returns the norms of the change and of the weights, or an
// error naming the first weight or moment the step would make non-finite
// (or exp_avg_sq negative), so that a caller can refuse a step before it
// is taken. Its sums are split over Workers as Step's elements are.
func (o *AdamW) Preview(params []Param, lr float64) (Update, error) {
	o.bind(params)
	k := o.coeffs(o.step+1, lr)
	parts := max(o.Workers, 1)
	type partSums struct {
		delta, norm float64
		bad         int // parameter of the first bad element, or -1
		at          int // and its index
	}
	sums := make([]partSums, parts)
	for i := range sums {
		sums[i].bad = -1
	}
	split(params, parts, func(part, i, lo, hi int) {
		s, p, st := &sums[part], params[i], &o.state[i]
		d, n, bad := vec.AdamWPreview(p.W[lo:hi], p.G[lo:hi], st.m[lo:hi], st.v[lo:hi], forParam(k, p))
		s.delta, s.norm = s.delta+d, s.norm+n
		if bad >= 0 && s.bad < 0 {
			s.bad, s.at = i, lo+bad
		}
	})
	var u Update
	for _, s := range sums {
		if s.bad >= 0 {
			return Update{}, o.badElement(params[s.bad], s.bad, s.at, k)
		}
		u.Norm += s.delta
		u.WeightNorm += s.norm
	}
	u.Norm, u.WeightNorm = math.Sqrt(u.Norm), math.Sqrt(u.WeightNorm)
	return u, nil
}

// badElement says which of the values element j of p (the i-th parameter)
// would take in a step is not finite (or a negative exp_avg_sq).
func (o *AdamW) badElement(p Param, i, j int, k coeffs) error {
	st := o.state[i]
	w, m, v := vec.AdamWElement(p.W[j], p.G[j], st.m[j], st.v[j], forParam(k, p))
	return ElementError(p.Name, j, w, m, v)
}

// ElementError is Preview's error for element j of parameter name when a
// step would leave it with weight w, exp_avg m and exp_avg_sq v, one of
// them not finite (or v negative): it names the first such value. An
// optimiser kept elsewhere (a GPU engine's) reports its refusals with it.
func ElementError(name string, j int, w, m, v float32) error {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	switch {
	case !finite(m):
		return fmt.Errorf("%w: %s%s[%d] would be %v", ErrNonFinite, name, suffixExpAvg, j, m)
	case !finite(v) || v < 0:
		return fmt.Errorf("%w: %s%s[%d] would be %v", ErrNonFinite, name, suffixExpAvgSq, j, v)
	}
	return fmt.Errorf("%w: weight %s[%d] would be %v", ErrNonFinite, name, j, w)
}

// ErrNonFinite is wrapped by Preview's error: the step would leave a weight
// or moment NaN or infinite.
var ErrNonFinite = errors.New("optim: update is not finite")

// CheckState returns an error naming the first moment tensor that holds a
// non-finite value or, for exp_avg_sq, a negative one: a state no AdamW
// step can produce from finite gradients, and one that makes every later
// weight NaN.
func (o *AdamW) CheckState() error {
	for _, st := range o.state {
		if i, ok := firstNonFinite(st.m); !ok {
			return fmt.Errorf("%w: %s%s[%d] = %v: not finite", ErrState, st.name, suffixExpAvg, i, st.m[i])
		}
		for i, x := range st.v {
			if !(x >= 0) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: %s%s[%d] = %v: must be finite and >= 0", ErrState, st.name, suffixExpAvgSq, i, x)
			}
		}
	}
	return nil
}

// firstNonFinite returns the index of the first NaN or ±Inf in x, and
// false; or 0 and true when every value is finite.
func firstNonFinite(x []float32) (int, bool) {
	for i, v := range x {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return i, false
		}
	}
	return 0, true
}

// coeffs are the float32 constants of step t.
type coeffs = vec.AdamWCoeffs

// Coeffs returns the float32 constants of step t (1, 2, ...) at learning
// rate lr exactly as Step computes them (weight decay included; a
// no-decay parameter's Decay is 1): what gpu/cuda/kernels' AdamW takes to
// give Step's bits on a device.
func (o *AdamW) Coeffs(t int, lr float64) vec.AdamWCoeffs { return o.coeffs(t, lr) }

// coeffs returns the constants of step t (1, 2, ...) at learning rate lr.
func (o *AdamW) coeffs(t int, lr float64) coeffs {
	bc1 := 1 - math.Pow(o.Beta1, float64(t))
	bc2 := 1 - math.Pow(o.Beta2, float64(t))
	return coeffs{
		B1: float32(o.Beta1), C1: float32(1 - o.Beta1),
		B2: float32(o.Beta2), C2: float32(1 - o.Beta2),
		StepSize: float32(lr / bc1),
		InvSqBC2: float32(1 / math.Sqrt(bc2)),
		Eps:      float32(o.Eps),
		Decay:    float32(1 - lr*o.WeightDecay),
	}
}

// forParam returns k with the weight decay p takes: none for NoDecay.
func forParam(k coeffs, p Param) *coeffs {
	if p.NoDecay {
		k.Decay = 1
	}
	return &k
}

// bind allocates the state on the first call and checks the params match
// it afterwards.
func (o *AdamW) bind(params []Param) {
	for _, p := range params {
		if len(p.G) != len(p.W) {
			panic(fmt.Sprintf("optim: param %q: len(G)=%d, len(W)=%d", p.Name, len(p.G), len(p.W)))
		}
	}
	if o.state == nil {
		o.state = make([]moments, len(params))
		for i, p := range params {
			o.state[i] = moments{name: p.Name, m: make([]float32, len(p.W)), v: make([]float32, len(p.W))}
		}
		return
	}
	if len(params) != len(o.state) {
		panic(fmt.Sprintf("optim: Step with %d params, state has %d", len(params), len(o.state)))
	}
	for i, p := range params {
		if st := o.state[i]; st.name != p.Name || len(st.m) != len(p.W) {
			panic(fmt.Sprintf("optim: param %d is %q (%d values), state has %q (%d values)",
				i, p.Name, len(p.W), st.name, len(st.m)))
		}
	}
}

// ClipGlobalNorm returns the global L2 norm of all gradients, √Σ g², and,
// when maxNorm > 0 and the norm exceeds it, scales every G in place by
// maxNorm/(norm+1e-6) as torch.nn.utils.clip_grad_norm_ does. A non-finite
// norm leaves the gradients unchanged (the caller should skip the step).
// The work is split over workers goroutines (see AdamW.Workers); the sum's
// rounding depends on their number.
func ClipGlobalNorm(params []Param, maxNorm float64, workers int) (normBefore float64) {
	sums := make([]float64, max(workers, 1))
	split(params, workers, func(part, i, lo, hi int) { sums[part] += sumSquares(params[i].G[lo:hi]) })
	var sum float64
	for _, s := range sums {
		sum += s
	}
	norm := math.Sqrt(sum)
	if maxNorm <= 0 || !(norm > maxNorm) || math.IsInf(norm, 0) {
		return norm
	}
	scale := float32(maxNorm / (norm + 1e-6))
	split(params, workers, func(_, i, lo, hi int) {
		g := params[i].G[lo:hi]
		for j := range g {
			g[j] *= scale
		}
	})
	return norm
}

// sumSquares accumulates Σ g² in float64 with four partial sums.
func sumSquares(g []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		a, b, c, d := float64(g[i]), float64(g[i+1]), float64(g[i+2]), float64(g[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(g); i++ {
		s0 += float64(g[i]) * float64(g[i])
	}
	return s0 + s1 + s2 + s3
}
