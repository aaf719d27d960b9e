package gpu

import (
	"math"
	"testing"
)

// TestRopeFreqsLlama3 checks the llama3 rule against values derived by
// hand, in all three of its regimes (C is the original context; a
// frequency f has wavelength λ = 2π/f).
//
// Case "powers of ten": e = 8, θ = 10⁴ gives f = 10^(−i) for i < 4,
// wavelengths 2π, 20π, 200π and 2000π. With C = 1024, low 1, high 4 the
// bounds are C/high = 256 and C/low = 1024: 2π and 20π (< 256) keep f;
// 2000π ≈ 6283 (> 1024) gets f/8 = 1.25e-4; 200π ≈ 628.3 lies between,
// with t = (C/λ − 1)/(4 − 1) = (5.12/π − 1)/3 ≈ 0.2099155, so f becomes
// 0.01·((1 − t)/8 + t) = 0.01·(0.125 + 0.875·t) ≈ 3.0867610e-3.
//
// Case "Llama-3.2-1B": e = 64, θ = 5·10⁵, factor 32, low 1, high 4,
// C = 8192 (bounds 2048 and 8192). f_i = 5·10⁵^(−i/32):
// i = 14: λ = 2π·5·10⁵^(14/32) ≈ 1956.5 < 2048, f kept ≈ 3.2114460e-3;
// i = 16: f = 1/√(5·10⁵) ≈ 1.4142136e-3, λ = 2π√(5·10⁵) ≈ 4442.9, t =
// (8192/4442.9 − 1)/3 ≈ 0.2812790, f·((1 − t)/32 + t) ≈ 4.2955680e-4;
// i = 18: λ ≈ 10089 > 8192, f/32 = 6.2277242e-4/32 ≈ 1.9461638e-5;
// i = 31: f/32 = 3.0138582e-6/32 ≈ 9.4183067e-8. (The decimals were
// worked out in float64 apart from this code.)
func TestRopeFreqsLlama3(t *testing.T) {
	for _, tc := range []struct {
		name  string
		e     int
		theta float64
		s     RopeScaling
		want  map[int]float64
	}{
		{"powers of ten", 8, 1e4, RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 1024},
			map[int]float64{0: 1, 1: 0.1, 2: 3.086760967011275e-3, 3: 1.25e-4}},
		{"Llama-3.2-1B", 64, 5e5, RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
			map[int]float64{0: 1, 14: 3.211445994752591e-3, 16: 4.2955679655936815e-4, 18: 1.9461638184831125e-5, 31: 9.41830672543491e-8}},
	} {
		f := ropeFreqs(tc.e, tc.theta, tc.s)
		if len(f) != tc.e/2 {
			t.Fatalf("%s: %d frequencies, want %d", tc.name, len(f), tc.e/2)
		}
		for i, want := range tc.want {
			if math.Abs(f[i]-want) > 1e-12*want {
				t.Errorf("%s: frequency %d = %.17g, want %.17g", tc.name, i, f[i], want)
			}
		}
		for i := 1; i < len(f); i++ {
			if !(f[i] < f[i-1]) {
				t.Errorf("%s: frequency %d = %g not below frequency %d = %g", tc.name, i, f[i], i-1, f[i-1])
			}
		}
	}
}

// TestRopeFreqsUnscaled: without scaling the frequencies are exactly
// θ^(−2i/e), the table every Llama checkpoint was trained with.
func TestRopeFreqsUnscaled(t *testing.T) {
	f := ropeFreqs(16, 10000, RopeScaling{})
	for i, got := range f {
		if want := math.Pow(10000, -float64(2*i)/16); got != want {
			t.Errorf("frequency %d = %.17g, want %.17g", i, got, want)
		}
	}
	cos, sin := ropeTable[float64](3, 16, 10000, RopeScaling{})
	for i := range 8 {
		if cos[8+i] != math.Cos(f[i]) || sin[16+i] != math.Sin(2*f[i]) {
			t.Errorf("table column %d: cos %g sin %g", i, cos[8+i], sin[16+i])
		}
	}
}

// TestRopeScalingContinuous: the interpolation meets the kept
// frequencies at wavelength C/high and the divided ones at C/low.
func TestRopeScalingContinuous(t *testing.T) {
	s := RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	c := float64(s.OriginalContext)
	for _, tc := range []struct{ f, want float64 }{
		{2 * math.Pi * s.HighFreqFactor / c, 2 * math.Pi * s.HighFreqFactor / c},
		{2 * math.Pi * s.LowFreqFactor / c, 2 * math.Pi * s.LowFreqFactor / c / s.Factor},
	} {
		for _, f := range []float64{tc.f * (1 - 1e-13), tc.f, tc.f * (1 + 1e-13)} {
			if got := s.scale(f); math.Abs(got-tc.want) > 1e-11*tc.want {
				t.Errorf("scale(%.17g) = %.17g, want %.17g", f, got, tc.want)
			}
		}
	}
}

func TestRopeScalingValidate(t *testing.T) {
	ok := RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	for _, tc := range []struct {
		name string
		edit func(*RopeScaling)
		want string
	}{
		{"llama 3.2", func(*RopeScaling) {}, ""},
		{"none", func(s *RopeScaling) { *s = RopeScaling{} }, ""},
		{"factor", func(s *RopeScaling) { s.Factor = 0.5 }, "rope_scaling.factor = 0.5: must be at least 1"},
		{"factor NaN", func(s *RopeScaling) { s.Factor = math.NaN() }, "rope_scaling.factor = NaN"},
		{"low", func(s *RopeScaling) { s.LowFreqFactor = 0 }, "rope_scaling.low_freq_factor = 0: must be positive"},
		{"high", func(s *RopeScaling) { s.HighFreqFactor = 1 }, "rope_scaling.high_freq_factor = 1: must be above low_freq_factor 1"},
		{"context", func(s *RopeScaling) { s.OriginalContext = 0 }, "rope_scaling.original_context = 0"},
		{"huge context", func(s *RopeScaling) { s.OriginalContext = MaxContext + 1 }, "rope_scaling.original_context = 131073"},
	} {
		c, _ := Preset("tiny")
		c.RopeScaling = ok
		tc.edit(&c.RopeScaling)
		checkConfigErr(t, tc.name, c.Validate(), tc.want)
	}
}
