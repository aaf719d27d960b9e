//go:build !purego

package panel

import "golang.org/x/sys/cpu"

// haveKernel selects the assembly kernels of kernel_amd64.s: every x86-64
// CPU since Haswell (2013) and Zen (2017) has AVX2 and FMA.
var haveKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// width is the panel width: 32 columns, two zmm registers per row, where
// the CPU has AVX-512 (Intel's servers since Skylake run twice the FLOPs
// per cycle in it; Zen 4 the same either way), else 16.
var width = kernelWidth(cpu.X86.HasAVX512F)

// kernel computes the 6×width tile c (row stride ldc) = a·b (+ c when
// acc) over k: element l of row i of a at a[i] + l·astep, row l of b
// (width contiguous values) at b + l·bstep (width for a packed panel).
func kernel(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool) {
	if width == 32 {
		kernel6x32s(a, astep, b, bstep, k, c, ldc, acc)
		return
	}
	kernel6x16s(a, astep, b, bstep, k, c, ldc, acc)
}

// kernel6x16s and kernel6x32s are kernel for widths 16 (AVX2) and 32
// (AVX-512).
//
//go:noescape
func kernel6x16s(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool)

//go:noescape
func kernel6x32s(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool)
