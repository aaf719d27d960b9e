package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// RoPE rotates in place the first heads·e columns of each of n rows of x
// ([n, stride]) by the row's position (pos [n] int32), from the tables cos
// and sin ([context, e/2]); sign −1 is the inverse, as rope.
func RoPE(rt cuda.Runtime, x, pos, cos, sin cuda.Ptr, n, stride, heads, e int, sign float32) error {
	return launchRows(rt, "rope", n, rowThreads, x, pos, cos, sin, n, stride, heads, e, sign)
}
