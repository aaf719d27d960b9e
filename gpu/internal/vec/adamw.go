package vec

import "math"

// AdamWCoeffs are the float32 constants of one AdamW step (see AdamWElement).
type AdamWCoeffs struct {
	B1, C1   float32 // β1 and 1 − β1
	B2, C2   float32 // β2 and 1 − β2
	StepSize float32 // lr / (1 − β1^t)
	InvSqBC2 float32 // 1 / √(1 − β2^t)
	Eps      float32
	Decay    float32 // 1 − lr·weight_decay (1: no decay)
}

// AdamWElement is one element's AdamW step, in float32 without fused
// multiply-adds (the AVX2 kernels round exactly the same way):
//
//	m' = β1·m + (1−β1)·g
//	v' = β2·v + (1−β2)·g·g
//	w' = w·decay − StepSize·m' / (√v'·InvSqBC2 + Eps)
func AdamWElement(w, g, m, v float32, k *AdamWCoeffs) (w2, m2, v2 float32) {
	m2 = k.B1*m + k.C1*g
	v2 = k.B2*v + k.C2*g*g
	denom := float32(math.Sqrt(float64(v2)))*k.InvSqBC2 + k.Eps
	return w*k.Decay - k.StepSize*m2/denom, m2, v2
}

// AdamW takes one AdamW step in place on every element of w, m and v.
func AdamW(w, g, m, v []float32, k *AdamWCoeffs) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	if useAVX2 {
		t := k.broadcast()
		adamwAVX2(w, g, m, v, &t)
		return
	}
	adamwGo(w, g, m, v, k)
}

// AdamWPreview computes the step AdamW would take without writing it: it
// returns Σ (w' − w)² and Σ w² in float64, and the index of the first
// element whose w', m' or v' would not be finite (or v' negative), or −1.
// The sums' rounding depends on the implementation; the verdict does not.
func AdamWPreview(w, g, m, v []float32, k *AdamWCoeffs) (delta, norm float64, bad int) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	if useAVX2 {
		t := k.broadcast()
		if delta, norm, ok := adamwPreviewAVX2(w, g, m, v, &t); ok {
			return delta, norm, -1
		}
	}
	return adamwPreviewGo(w, g, m, v, k)
}

// broadcast repeats each coefficient over 8 lanes, in field order, for the
// assembly kernels.
func (k *AdamWCoeffs) broadcast() (t [64]float32) {
	for i, c := range [8]float32{k.B1, k.C1, k.B2, k.C2, k.StepSize, k.InvSqBC2, k.Eps, k.Decay} {
		for j := range 8 {
			t[8*i+j] = c
		}
	}
	return t
}

func adamwGo(w, g, m, v []float32, k *AdamWCoeffs) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i := range w {
		w[i], m[i], v[i] = AdamWElement(w[i], g[i], m[i], v[i], k)
	}
}

func adamwPreviewGo(w, g, m, v []float32, k *AdamWCoeffs) (delta, norm float64, bad int) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i := range w {
		w2, m2, v2 := AdamWElement(w[i], g[i], m[i], v[i], k)
		if !finite(w2) || !finite(m2) || !finite(v2) || v2 < 0 {
			return 0, 0, i
		}
		d := float64(w2) - float64(w[i])
		delta += d * d
		norm += float64(w[i]) * float64(w[i])
	}
	return delta, norm, -1
}

// finite reports whether x is neither NaN nor ±Inf.
func finite(x float32) bool { return math.Float32bits(x)&0x7f80_0000 != 0x7f80_0000 }
