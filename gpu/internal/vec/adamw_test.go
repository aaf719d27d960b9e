package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

var testAdamW = AdamWCoeffs{B1: 0.9, C1: 0.1, B2: 0.999, C2: 0.001, StepSize: 1e-3 / 0.1, InvSqBC2: float32(1 / math.Sqrt(0.001)), Eps: 1e-8, Decay: 1 - 1e-5}

// TestAdamWKernels: the AVX2 step is bit-identical to AdamWElement at every
// length (each tail), writes nothing past its slices, and matches
// torch.optim.AdamW's formula in float64 to float32 rounding.
func TestAdamWKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	k := &testAdamW
	for _, impl := range kernelImpls() {
		f := adamwGo
		if impl == "avx2" {
			f = func(w, g, m, v []float32, k *AdamWCoeffs) { t := k.broadcast(); adamwAVX2(w, g, m, v, &t) }
		}
		for n := 0; n <= 41; n++ {
			w, g, m, v := withSentinel(n, 7), randF32(rng, n, 1), randF32(rng, n, 0.1), withSentinel(n, 7)
			m2, v2 := withSentinel(n, 7), withSentinel(n, 7)
			copy(m2, m)
			for i := range n {
				w[i], v[i] = float32(rng.NormFloat64()), float32(0.01*rng.Float64())
			}
			copy(v2, v)
			w0 := append([]float32(nil), w...)
			f(w, g, m2, v2, k)
			for i := range n {
				ew, em, ev := AdamWElement(w0[i], g[i], m[i], v[i], k)
				if math.Float32bits(w[i]) != math.Float32bits(ew) || m2[i] != em || v2[i] != ev {
					t.Fatalf("%s n=%d [%d]: (%v %v %v), AdamWElement (%v %v %v)", impl, n, i, w[i], m2[i], v2[i], ew, em, ev)
				}
				// the formula in float64
				mm := 0.9*float64(m[i]) + 0.1*float64(g[i])
				vv := 0.999*float64(v[i]) + 0.001*float64(g[i])*float64(g[i])
				ww := float64(w0[i])*float64(k.Decay) - float64(k.StepSize)*mm/(math.Sqrt(vv)*float64(k.InvSqBC2)+1e-8)
				if !closeTo(w[i], ww, 1e-5) || !closeTo(m2[i], mm, 1e-6) || !closeTo(v2[i], vv, 1e-6) {
					t.Fatalf("%s n=%d [%d]: (%v %v %v), float64 formula (%v %v %v)", impl, n, i, w[i], m2[i], v2[i], ww, mm, vv)
				}
			}
			untouched(t, impl+" w", w, 7)
			untouched(t, impl+" m", m2, 7)
			untouched(t, impl+" v", v2, 7)
		}
	}
}

// TestAdamWPreview: the preview's sums are those of the step it previews,
// it writes nothing, and it names the first element that would not be
// finite (or whose v' would be negative), at every length and position.
func TestAdamWPreview(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	k := &testAdamW
	bk := k.broadcast()
	for n := 1; n <= 41; n++ {
		w, g, m, v := randF32(rng, n, 1), randF32(rng, n, 1), randF32(rng, n, 0.1), make([]float32, n)
		delta, norm, bad := AdamWPreview(w, g, m, v, k)
		if useAVX2 {
			if _, _, ok := adamwPreviewAVX2(w, g, m, v, &bk); !ok {
				t.Fatalf("n=%d: the AVX2 preview refused a finite step", n)
			}
		}
		var wantD, wantN float64
		for i := range n {
			w2, _, _ := AdamWElement(w[i], g[i], m[i], v[i], k)
			d := float64(w2) - float64(w[i])
			wantD += d * d
			wantN += float64(w[i]) * float64(w[i])
		}
		if bad != -1 || math.Abs(delta-wantD) > 1e-12*wantD || math.Abs(norm-wantN) > 1e-12*wantN {
			t.Fatalf("n=%d: preview (%v, %v, %d), want (%v, %v, -1)", n, delta, norm, bad, wantD, wantN)
		}
		for _, poison := range []struct {
			name string
			set  func(i int)
		}{
			{"NaN g", func(i int) { g[i] = float32(math.NaN()) }},
			{"Inf m", func(i int) { m[i] = float32(math.Inf(1)) }},
			{"huge g", func(i int) { g[i] = 1e30 }},
			{"negative v", func(i int) { v[i] = -1 }},
			{"Inf w", func(i int) { w[i] = float32(math.Inf(-1)) }},
		} {
			at := rng.IntN(n)
			saved := [4]float32{w[at], g[at], m[at], v[at]}
			poison.set(at)
			snapshot := [4][]float32{append([]float32(nil), w...), append([]float32(nil), g...), append([]float32(nil), m...), append([]float32(nil), v...)}
			if _, _, bad := AdamWPreview(w, g, m, v, k); bad != at {
				t.Errorf("n=%d, %s at %d: preview says %d", n, poison.name, at, bad)
			}
			if useAVX2 {
				if _, _, ok := adamwPreviewAVX2(w, g, m, v, &bk); ok {
					t.Errorf("n=%d, %s at %d: the AVX2 preview did not see it", n, poison.name, at)
				}
			}
			for j, s := range [4][]float32{w, g, m, v} {
				for i := range s {
					if math.Float32bits(s[i]) != math.Float32bits(snapshot[j][i]) {
						t.Fatalf("n=%d, %s: the preview wrote", n, poison.name)
					}
				}
			}
			w[at], g[at], m[at], v[at] = saved[0], saved[1], saved[2], saved[3]
		}
	}
}
