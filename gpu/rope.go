package gpu

import (
	"fmt"
	"math"
)

// RopeScaling is Llama 3.x's scaling of the RoPE frequencies (Hugging
// Face rope_scaling of rope_type "llama3", as Llama-3.2-1B has); the zero
// value is no scaling. ropeFreqs applies it.
type RopeScaling struct {
	// Factor divides the low frequencies; at least 1.
	Factor float64 `json:"factor,omitempty"`
	// LowFreqFactor: frequencies of wavelength above
	// OriginalContext/LowFreqFactor are divided by Factor.
	LowFreqFactor float64 `json:"low_freq_factor,omitempty"`
	// HighFreqFactor (above LowFreqFactor): frequencies of wavelength
	// under OriginalContext/HighFreqFactor are kept as they are.
	HighFreqFactor float64 `json:"high_freq_factor,omitempty"`
	// OriginalContext is the context of pre-training before it was
	// extended (original_max_position_embeddings).
	OriginalContext int `json:"original_context,omitempty"`
}

// enabled reports whether s scales anything (is not the zero value).
func (s RopeScaling) enabled() bool { return s != RopeScaling{} }

// validate reports the first field the llama3 rule cannot use, or nil
// for the zero value.
func (s RopeScaling) validate() error {
	switch {
	case !s.enabled():
		return nil
	case !(s.Factor >= 1) || math.IsInf(s.Factor, 0):
		return fmt.Errorf("rope_scaling.factor = %g: must be at least 1", s.Factor)
	case !(s.LowFreqFactor > 0) || math.IsInf(s.LowFreqFactor, 0):
		return fmt.Errorf("rope_scaling.low_freq_factor = %g: must be positive", s.LowFreqFactor)
	case !(s.HighFreqFactor > s.LowFreqFactor) || math.IsInf(s.HighFreqFactor, 0):
		return fmt.Errorf("rope_scaling.high_freq_factor = %g: must be above low_freq_factor %g", s.HighFreqFactor, s.LowFreqFactor)
	case s.OriginalContext < 1 || s.OriginalContext > MaxContext:
		return fmt.Errorf("rope_scaling.original_context = %d: must be in [1, %d]", s.OriginalContext, MaxContext)
	}
	return nil
}

// ropeFreqs returns the e/2 RoPE frequencies of a head of width e, in
// radians per position: θ^(−2i/e) for i < e/2, each then scaled by s.
// The llama3 rule (transformers' rope_utils) looks at the wavelength
// λ = 2π/f of a frequency f against the original context C: λ under
// C/HighFreqFactor keeps f; λ over C/LowFreqFactor gets f/Factor; in
// between, with t = (C/λ − LowFreqFactor)/(HighFreqFactor −
// LowFreqFactor) rising from 0 to 1 as λ shrinks, f becomes
// (1 − t)·f/Factor + t·f, continuous at both ends. With s zero the
// frequencies are exactly those of unscaled RoPE.
func ropeFreqs(e int, theta float64, s RopeScaling) []float64 {
	f := make([]float64, e/2)
	for i := range f {
		f[i] = math.Pow(theta, -float64(2*i)/float64(e))
		if s.enabled() {
			f[i] = s.scale(f[i])
		}
	}
	return f
}

// scale applies the llama3 rule of ropeFreqs to one frequency.
func (s RopeScaling) scale(f float64) float64 {
	c := float64(s.OriginalContext)
	wavelen := 2 * math.Pi / f
	switch {
	case wavelen < c/s.HighFreqFactor:
		return f
	case wavelen > c/s.LowFreqFactor:
		return f / s.Factor
	}
	t := (c/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
	return (1-t)*f/s.Factor + t*f
}
