//go:build !purego

package panel

import "golang.org/x/sys/cpu"

// haveKernel selects the assembly kernel of kernel_amd64.s: every x86-64
// CPU since Haswell (2013) and Zen (2017) has AVX2 and FMA.
var haveKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernel6x16s computes the 6×16 tile c (row stride ldc) = a·b (+ c when
// acc) over k: element l of row i of a at a[i] + l·astep, row l of b (16
// contiguous values) at b + l·bstep (16 for a packed panel).
//
//go:noescape
func kernel6x16s(a *[6]*float32, astep int, b *float32, bstep int, k int, c *float32, ldc int, acc bool)
