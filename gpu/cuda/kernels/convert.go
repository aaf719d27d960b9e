package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// F32ToBF16 rounds n floats at src to bf16 (nearest even) at dst (n
// uint16s), for the bf16 products.
func F32ToBF16(rt cuda.Runtime, dst, src cuda.Ptr, n int) error {
	return launchElements(rt, "f32_to_bf16_kernel", int64(n), dst, src, int64(n))
}

// BF16ToF32 widens n bf16 values at src to floats at dst.
func BF16ToF32(rt cuda.Runtime, dst, src cuda.Ptr, n int) error {
	return launchElements(rt, "bf16_to_f32_kernel", int64(n), dst, src, int64(n))
}

// AddInPlace adds n floats: y += x.
func AddInPlace(rt cuda.Runtime, y, x cuda.Ptr, n int) error {
	return launchElements(rt, "add_inplace", int64(n), y, x, int64(n))
}

// GatherRows copies rows rows (k int32s) of src ([*, d]) to the first k
// rows of dst ([k, d]), as gatherRows.
func GatherRows(rt cuda.Runtime, dst, src, rows cuda.Ptr, k, d int) error {
	return launchElements(rt, "gather_rows", int64(k)*int64(d), dst, src, rows, k, d)
}

// ScatterRows copies the k rows of src ([k, d]) to rows rows (distinct) of
// dst ([n, d]); clear dst first for scatterRows' zeros elsewhere.
func ScatterRows(rt cuda.Runtime, dst, src, rows cuda.Ptr, k, d int) error {
	return launchElements(rt, "scatter_rows", int64(k)*int64(d), dst, src, rows, k, d)
}
