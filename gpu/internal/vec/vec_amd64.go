//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels of vec_amd64.s: every x86-64 CPU
// since Haswell (2013) and Zen (2017) has AVX2 and FMA.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// The assembly kernels; vec.go documents each under its wrapper's name
// (expShiftAVX2 is ExpShift, and so on).

//go:noescape
func expShiftAVX2(dst, z []float32, shift, scale float32) float64

//go:noescape
func swigluAVX2(y, sg, g, u []float32)

//go:noescape
func swigluBackAVX2(dg, du, dy, g, u, sg []float32)

//go:noescape
func dotAVX2(a, b []float32) float32

//go:noescape
func dot3AVX2(a, b, c []float32) float32

//go:noescape
func scaleMulAVX2(y, x, w []float32, s float32)

//go:noescape
func rmsBackAVX2(dx, dy, x, w []float32, s, c float32)

//go:noescape
func mulAddAVX2(dst, a, b []float32, s float32)

//go:noescape
func scaleAVX2(x []float32, s float32)

//go:noescape
func maxAVX2(x []float32) float32

//go:noescape
func scoresAVX2(sc, q, k []float32, stride int, scale float32)

//go:noescape
func mixAVX2(o, p, v []float32, stride int)

//go:noescape
func mulAffineAVX2(dst, x, p []float32, c0, c1 float32)

//go:noescape
func ropeHeadsAVX2(v []float32, heads int, c, s []float32, sign float32)

//go:noescape
func adamwAVX2(w, g, m, v []float32, k *[64]float32)

//go:noescape
func adamwPreviewAVX2(w, g, m, v []float32, k *[64]float32) (delta, norm float64, ok bool)
