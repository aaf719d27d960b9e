package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// SwiGLU computes act = silu(gate)·up for n rows of m (gu [n, 2m], act and
// sig [n, m]), keeping σ(gate) in sig unless sig is 0, as swiglu.
func SwiGLU(rt cuda.Runtime, act, sig, gu cuda.Ptr, n, m int) error {
	return launchElements(rt, "swiglu", int64(n)*int64(m), act, sig, gu, n, m)
}

// SwiGLUBackward writes dgu ([n, 2m]) from dact ([n, m]), as swigluBackward.
func SwiGLUBackward(rt cuda.Runtime, dgu, dact, gu, sig cuda.Ptr, n, m int) error {
	return launchElements(rt, "swiglu_backward", int64(n)*int64(m), dgu, dact, gu, sig, n, m)
}
