package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// SwiGLU computes act = silu(gate)·up for n rows of m (gu [n, 2m], act and
// sig [n, m]), keeping σ(gate) in sig unless sig is 0, as swiglu; unless
// act16 is 0 it also writes act rounded to bf16 there ([n, m] uint16s).
func SwiGLU(rt cuda.Runtime, act, act16, sig, gu cuda.Ptr, n, m int) error {
	return launchElements(rt, "swiglu", int64(n)*int64(m), act, act16, sig, gu, n, m)
}

// SwiGLUBackward writes dgu ([n, 2m]) from dact ([n, m]), as swigluBackward,
// and unless dgu16 is 0 dgu rounded to bf16 there ([n, 2m] uint16s).
func SwiGLUBackward(rt cuda.Runtime, dgu, dgu16, dact, gu, sig cuda.Ptr, n, m int) error {
	return launchElements(rt, "swiglu_backward", int64(n)*int64(m), dgu, dgu16, dact, gu, sig, n, m)
}
