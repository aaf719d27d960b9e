package optim

import (
	"fmt"
	"math"
)

// Schedule kinds.
const (
	// Constant is Base at every step (Warmup must be 0).
	Constant = "constant"
	// LinearWarmup rises linearly over Warmup steps, then stays at Base.
	LinearWarmup = "linear_warmup"
	// Cosine warms up linearly, then decays by a half cosine from Base to
	// Min at step Total, and stays at Min after.
	Cosine = "cosine"
	// LinearDecay warms up linearly, then decays linearly from Base to Min
	// at step Total, and stays at Min after.
	LinearDecay = "linear"
)

// Schedule gives the learning rate of each optimiser step. Steps are
// 0-based: LR(0) is the rate of the first Step.
//
//	warmup (s < Warmup):  Base·(s+1)/Warmup
//	constant:             Base
//	cosine (s ≥ Warmup):  Min + (Base−Min)·½·(1 + cos(π·p)),  p = min(1, (s−Warmup)/(Total−Warmup))
//	linear (s ≥ Warmup):  Min + (Base−Min)·(1 − p)
//
// Warmup reaches Base at s = Warmup−1, and the first step is never 0
// (unlike transformers' schedule, whose first step has lr 0).
type Schedule struct {
	// Kind is Constant, LinearWarmup or Cosine.
	Kind string
	// Warmup is the number of warm-up steps (0 = none).
	Warmup int
	// Total is the step at which Cosine reaches Min (ignored otherwise).
	Total int
	// Base is the peak learning rate.
	Base float64
	// Min is Cosine's final learning rate, in [0, Base].
	Min float64
}

// Validate checks the schedule and names the first bad field.
func (s Schedule) Validate() error {
	switch {
	case s.Kind != Constant && s.Kind != LinearWarmup && s.Kind != Cosine && s.Kind != LinearDecay:
		return fmt.Errorf("%w: schedule kind = %q: want constant, linear_warmup, cosine or linear", ErrConfig, s.Kind)
	case !(s.Base >= 0) || math.IsInf(s.Base, 0):
		return fmt.Errorf("%w: base lr = %v: must be finite and >= 0", ErrConfig, s.Base)
	case s.Warmup < 0:
		return fmt.Errorf("%w: warmup = %d: must be >= 0", ErrConfig, s.Warmup)
	case s.Kind == Constant && s.Warmup != 0:
		return fmt.Errorf("%w: warmup = %d: constant schedule has no warm-up (use linear_warmup)", ErrConfig, s.Warmup)
	case s.decays() && !(s.Min >= 0 && s.Min <= s.Base):
		return fmt.Errorf("%w: min lr = %v: must be in [0, base %v]", ErrConfig, s.Min, s.Base)
	case s.decays() && s.Total <= s.Warmup:
		return fmt.Errorf("%w: total = %d: %s needs total > warmup %d", ErrConfig, s.Total, s.Kind, s.Warmup)
	}
	return nil
}

// LR returns the learning rate of 0-based step (negative steps give the
// rate of step 0).
func (s Schedule) LR(step int) float64 {
	step = max(step, 0)
	if step < s.Warmup {
		return s.Base * float64(step+1) / float64(s.Warmup)
	}
	if !s.decays() {
		return s.Base
	}
	progress := math.Min(1, float64(step-s.Warmup)/float64(max(1, s.Total-s.Warmup)))
	if s.Kind == LinearDecay {
		return s.Min + (s.Base-s.Min)*(1-progress)
	}
	return s.Min + (s.Base-s.Min)*0.5*(1+math.Cos(math.Pi*progress))
}

// decays reports whether the kind decays after the warm-up.
func (s Schedule) decays() bool { return s.Kind == Cosine || s.Kind == LinearDecay }
