//go:build !amd64 || purego

package vec

// Without assembly (another architecture, or -tags purego) every vector
// kernel runs its Go version; the AVX2 names below are never called.
const useAVX2 = false

func expShiftAVX2(dst, z []float32, shift, scale float32) float64 { panic("gpu: no AVX2 kernels") }
func swigluAVX2(y, sg, g, u []float32)                            { panic("gpu: no AVX2 kernels") }
func swigluBackAVX2(dg, du, dy, g, u, sg []float32)               { panic("gpu: no AVX2 kernels") }
func dotAVX2(a, b []float32) float32                              { panic("gpu: no AVX2 kernels") }
func dot3AVX2(a, b, c []float32) float32                          { panic("gpu: no AVX2 kernels") }
func scaleMulAVX2(y, x, w []float32, s float32)                   { panic("gpu: no AVX2 kernels") }
func rmsBackAVX2(dx, dy, x, w []float32, s, c float32)            { panic("gpu: no AVX2 kernels") }
func mulAddAVX2(dst, a, b []float32, s float32)                   { panic("gpu: no AVX2 kernels") }
func scaleAVX2(x []float32, s float32)                            { panic("gpu: no AVX2 kernels") }
func maxAVX2(x []float32) float32                                 { panic("gpu: no AVX2 kernels") }
func scoresAVX2(sc, q, k []float32, stride int, scale float32)    { panic("gpu: no AVX2 kernels") }
func mixAVX2(o, p, v []float32, stride int)                       { panic("gpu: no AVX2 kernels") }
func mulAffineAVX2(dst, x, p []float32, c0, c1 float32)           { panic("gpu: no AVX2 kernels") }
func ropeHeadsAVX2(v []float32, heads int, c, s []float32, sign float32) {
	panic("gpu: no AVX2 kernels")
}
func adamwAVX2(w, g, m, v []float32, k *[64]float32) { panic("gpu: no AVX2 kernels") }
func adamwPreviewAVX2(w, g, m, v []float32, k *[64]float32) (delta, norm float64, ok bool) {
	panic("gpu: no AVX2 kernels")
}
