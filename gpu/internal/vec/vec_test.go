package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector kernels of vec.go against float64 formulas, for both the Go
// versions and (on a CPU that has them) the AVX2 ones, at every length
// from 0 to 41 so that each tail length is covered.

// kernelImpls lists the implementations to test.
func kernelImpls() []string {
	if useAVX2 {
		return []string{"go", "avx2"}
	}
	return []string{"go"}
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n+3) // room past the end: kernels must not write there
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v[:n]
}

// closeTo reports whether got is within tol relative (or tol absolute near 0) of want.
func closeTo(got float32, want, tol float64) bool {
	return math.Abs(float64(got)-want) <= tol*math.Max(1, math.Abs(want))
}

// untouched checks that the three floats past len(v) still hold sentinel.
func untouched(t *testing.T, name string, v []float32, sentinel float32) {
	t.Helper()
	for _, x := range v[len(v):cap(v)] {
		if x != sentinel {
			t.Fatalf("%s: wrote past the end of its output", name)
		}
	}
}

func withSentinel(n int, s float32) []float32 {
	v := make([]float32, n+3)
	for i := range v {
		v[i] = s
	}
	return v[:n]
}

func TestVecExpShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, impl := range kernelImpls() {
		f := expShiftGo
		if impl == "avx2" {
			f = expShiftAVX2
		}
		for n := 0; n <= 41; n++ {
			z := randF32(rng, n, 3)
			dst := withSentinel(n, -7)
			sum := f(dst, z, 0.5, -1.5)
			want := 0.0
			for i, x := range z {
				e := math.Exp(float64((x - 0.5) * -1.5)) // the argument rounded to float32 as the kernel has it
				want += e
				if !closeTo(dst[i], e, 4e-7) {
					t.Fatalf("%s n=%d: e^x[%d] = %g, want %g", impl, n, i, dst[i], e)
				}
			}
			untouched(t, impl+" expShift", dst, -7)
			if math.Abs(sum-want) > 1e-6*want {
				t.Fatalf("%s n=%d: sum %g, want %g", impl, n, sum, want)
			}
		}
		// the whole range, the clamps and NaN
		var xs []float32
		for x := -87.0; x <= 88.0; x += 0.001 {
			xs = append(xs, float32(x))
		}
		xs = append(xs, -1000, 1000, float32(math.Inf(-1)), float32(math.NaN()))
		out := make([]float32, len(xs))
		f(out, xs, 0, 1)
		worst := 0.0
		for i, x := range xs[:len(xs)-4] {
			want := math.Exp(float64(x))
			worst = max(worst, math.Abs(float64(out[i])-want)/want)
		}
		if worst > 4e-7 {
			t.Errorf("%s: exp worst relative error %.3g, want ≤ 4e-7", impl, worst)
		}
		t.Logf("%s: exp worst relative error %.3g", impl, worst)
		tail := out[len(out)-4:]
		if !(tail[0] >= 0 && tail[0] < 1.3e-38) || !(tail[1] > 1e38) || !(tail[2] >= 0 && tail[2] < 1.3e-38) || !math.IsNaN(float64(tail[3])) {
			t.Errorf("%s: e^(-1000, 1000, -Inf, NaN) = %v, want tiny, huge, tiny, NaN", impl, tail)
		}
	}
}

func TestVecSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, impl := range kernelImpls() {
		fwd, back := swigluGo, swigluBackGo
		if impl == "avx2" {
			fwd, back = swigluAVX2, swigluBackAVX2
		}
		for n := 0; n <= 41; n++ {
			g, u, dy := randF32(rng, n, 4), randF32(rng, n, 1), randF32(rng, n, 1)
			g = append(g[:n:n], 0)[:n] // keep len n
			y, sg := withSentinel(n, 3), withSentinel(n, 3)
			fwd(y, sg, g, u)
			dg, du := withSentinel(n, 3), withSentinel(n, 3)
			back(dg, du, dy, g, u, sg)
			for j := range g {
				x, up, d := float64(g[j]), float64(u[j]), float64(dy[j])
				s := 1 / (1 + math.Exp(-x))
				if !closeTo(sg[j], s, 1e-6) || !closeTo(y[j], x*s*up, 1e-6) {
					t.Fatalf("%s n=%d j=%d: σ %g y %g, want %g %g", impl, n, j, sg[j], y[j], s, x*s*up)
				}
				if !closeTo(dg[j], d*up*s*(1+x*(1-s)), 1e-5) || !closeTo(du[j], d*x*s, 1e-5) {
					t.Fatalf("%s n=%d j=%d: dgate %g dup %g, want %g %g", impl, n, j, dg[j], du[j], d*up*s*(1+x*(1-s)), d*x*s)
				}
			}
			for _, v := range [][]float32{y, sg, dg, du} {
				untouched(t, impl+" swiglu", v, 3)
			}
		}
	}
}

func TestVecRowKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 3))
	for _, impl := range kernelImpls() {
		dot, dot3, smul, rback, madd, scale, mx, maff := dotGo, dot3Go, scaleMulGo, rmsBackGo, mulAddGo, scaleGo, maxGo, mulAffineGo
		if impl == "avx2" {
			dot, dot3, smul, rback, madd, scale, mx, maff = dotAVX2, dot3AVX2, scaleMulAVX2, rmsBackAVX2, mulAddAVX2, scaleAVX2, maxAVX2, mulAffineAVX2
		}
		for n := 0; n <= 71; n++ {
			a, b, c := randF32(rng, n, 1), randF32(rng, n, 1), randF32(rng, n, 1)
			var d2, d3 float64
			for i := range a {
				d2 += float64(a[i]) * float64(b[i])
				d3 += float64(a[i]) * float64(b[i]) * float64(c[i])
			}
			if got := dot(a, b); !closeTo(got, d2, 1e-5) {
				t.Fatalf("%s n=%d: dot %g, want %g", impl, n, got, d2)
			}
			if got := dot3(a, b, c); !closeTo(got, d3, 1e-5) {
				t.Fatalf("%s n=%d: dot3 %g, want %g", impl, n, got, d3)
			}
			y := withSentinel(n, 5)
			smul(y, a, b, 0.7)
			dx := withSentinel(n, 5)
			for i := range dx {
				dx[i] = c[i]
			}
			rback(dx, a, b, c, 0.3, -1.25) // dx = c + 0.3·a·c + 1.25·b
			acc := withSentinel(n, 5)
			for i := range acc {
				acc[i] = a[i]
			}
			madd(acc, b, c, 2) // acc = a + 2·b·c
			sc := withSentinel(n, 5)
			copy(sc, b)
			scale(sc, -3)
			af := withSentinel(n, 5)
			copy(af, a)
			maff(af, af, c, 0.5, -2) // in place: af = c·(0.5 − 2·a)
			for i := range a {
				x, w, z := float64(a[i]), float64(b[i]), float64(c[i])
				if !closeTo(y[i], 0.7*x*w, 1e-6) || !closeTo(dx[i], z+0.3*x*z+1.25*w, 1e-6) ||
					!closeTo(acc[i], x+2*w*z, 1e-6) || !closeTo(sc[i], -3*w, 1e-6) || !closeTo(af[i], z*(0.5-2*x), 1e-6) {
					t.Fatalf("%s n=%d i=%d: scaleMul %g rmsBack %g mulAdd %g scale %g", impl, n, i, y[i], dx[i], acc[i], sc[i])
				}
			}
			for _, v := range [][]float32{y, dx, acc, sc, af} {
				untouched(t, impl+" row kernels", v, 5)
			}
			if n >= 8 || (impl == "go" && n >= 1) {
				want := a[0]
				for _, v := range a {
					want = max(want, v)
				}
				if got := mx(a); got != want {
					t.Fatalf("%s n=%d: max %g, want %g", impl, n, got, want)
				}
			}
		}
	}
}

func TestVecAttentionKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 4))
	for _, impl := range kernelImpls() {
		scores, mix, rope := scoresGo, mixGo, ropeGo
		if impl == "avx2" {
			scores, mix = scoresAVX2, mixAVX2
			rope = func(v, c, s []float32, sign float32) { ropeHeadsAVX2(v, 1, c, s, sign) }
		}
		for _, e := range []int{8, 16, 32, 40, 64, 72} {
			for _, n := range []int{1, 2, 5, 8, 33} {
				stride := 3*e + 8
				q, k, v, p := randF32(rng, e, 1), randF32(rng, n*stride, 1), randF32(rng, n*stride, 1), randF32(rng, n, 1)
				sc, o := withSentinel(n, 9), withSentinel(e, 9)
				scores(sc, q, k, stride, 0.25)
				mix(o, p, v, stride)
				for s := 0; s < n; s++ {
					var want float64
					for j := range q {
						want += float64(q[j]) * float64(k[s*stride+j])
					}
					if !closeTo(sc[s], 0.25*want, 1e-5) {
						t.Fatalf("%s e=%d n=%d: score %d = %g, want %g", impl, e, n, s, sc[s], 0.25*want)
					}
				}
				for j := range o {
					var want float64
					for s := range p {
						want += float64(p[s]) * float64(v[s*stride+j])
					}
					if !closeTo(o[j], want, 1e-5) {
						t.Fatalf("%s e=%d n=%d: mix[%d] = %g, want %g", impl, e, n, j, o[j], want)
					}
				}
				untouched(t, impl+" scores", sc, 9)
				untouched(t, impl+" mix", o, 9)
			}
			half := e / 2
			if half%8 != 0 {
				continue
			}
			x, c, s := randF32(rng, e, 1), randF32(rng, half, 1), randF32(rng, half, 1)
			for _, sign := range []float32{1, -1} {
				y := withSentinel(e, 9)
				copy(y, x)
				rope(y, c, s, sign)
				for i := 0; i < half; i++ {
					x1, x2, cs, sn := float64(x[i]), float64(x[i+half]), float64(c[i]), float64(sign)*float64(s[i])
					if !closeTo(y[i], x1*cs-x2*sn, 1e-6) || !closeTo(y[i+half], x2*cs+x1*sn, 1e-6) {
						t.Fatalf("%s e=%d sign %g: rope[%d] = %g, %g", impl, e, sign, i, y[i], y[i+half])
					}
				}
				untouched(t, impl+" rope", y, 9)
				if impl == "avx2" { // three heads at once against one at a time
					hs := withSentinel(3*e, 9)
					copy(hs, x)
					copy(hs[e:], x)
					copy(hs[2*e:], x)
					ropeHeadsAVX2(hs, 3, c, s, sign)
					for h := 0; h < 3; h++ {
						for i := 0; i < e; i++ {
							if hs[h*e+i] != y[i] {
								t.Fatalf("e=%d sign %g: ropeHeads head %d [%d] = %g, rope %g", e, sign, h, i, hs[h*e+i], y[i])
							}
						}
					}
					untouched(t, "ropeHeads", hs, 9)
				}
			}
		}
	}
}
