//go:build !amd64 || purego

package panel

// Without assembly (another architecture, or -tags purego) Available
// reports false and the callers keep their BLAS.
const haveKernel = false

var width = 16

func kernel(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool) {
	panic("panel: no kernel on this build")
}
