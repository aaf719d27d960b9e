package safetensors

import (
	"encoding/binary"
	"math"
)

// Dtype names as they appear in the header.
const (
	F32  = "F32"
	F64  = "F64"
	BF16 = "BF16"
	F16  = "F16"
)

// dtypeSizes gives the element size in bytes of every dtype the format
// defines; only F32, F64, BF16 and F16 can be converted to floats.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"I16": 2, "U16": 2, F16: 2, BF16: 2,
	"I32": 4, "U32": 4, F32: 4,
	"I64": 8, "U64": 8, F64: 8,
}

// bf16ToF32 widens a bfloat16 bit pattern (the top 16 bits of a float32).
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f16ToF32 converts an IEEE 754 half-precision bit pattern exactly,
// including subnormals, infinities and NaN.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	default: // subnormal: frac * 2^-24
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
}

// decodeF32 converts raw little-endian data of dtype into float32 values.
func decodeF32(dtype string, raw []byte, n int) []float32 {
	out := make([]float32, n)
	le := binary.LittleEndian
	switch dtype {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(raw[8*i:])))
		}
	case BF16:
		for i := range out {
			out[i] = bf16ToF32(le.Uint16(raw[2*i:]))
		}
	case F16:
		for i := range out {
			out[i] = f16ToF32(le.Uint16(raw[2*i:]))
		}
	}
	return out
}

// decodeF64 converts raw little-endian data of dtype into float64 values.
func decodeF64(dtype string, raw []byte, n int) []float64 {
	if dtype == F64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		return out
	}
	f := decodeF32(dtype, raw, n)
	out := make([]float64, n)
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}
