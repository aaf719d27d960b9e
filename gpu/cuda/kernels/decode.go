package kernels

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// DecodeShape is the shape of one layer's key/value cache and its rows: H
// query heads, G key/value heads of width E (16, 32, 64 or 128), Tmax
// positions a slot.
type DecodeShape struct{ H, G, E, Tmax int }

func (s DecodeShape) check() error {
	return AttnShape{B: 1, T: 1, H: s.H, G: s.G, E: s.E}.check()
}

// KVAppend copies the rotated keys and the values of r rows of qkv ([r,
// (H+2G)·E]) into the caches kc and vc ([S, G, Tmax, E]) at each row's
// slot and position (slot, pos [r] int32), as decoder.cacheKV.
func KVAppend(rt cuda.Runtime, kc, vc, qkv, slot, pos cuda.Ptr, r int, s DecodeShape) error {
	return launchRows(rt, "kv_append", r, rowThreads, kc, vc, qkv, slot, pos, r, s.H, s.G, s.E, s.Tmax)
}

// DecodeAttention writes att ([r, H·E]) for r outputs: output k is the
// attention of row rows[k] (rows 0: row k) of qkv over its slot's cached
// positions 0..pos, as decoder.attend.
func DecodeAttention(rt cuda.Runtime, att, qkv, kc, vc, slot, pos, rows cuda.Ptr, r int, s DecodeShape) error {
	if err := s.check(); err != nil {
		return err
	}
	if r == 0 {
		return nil
	}
	shared := 4 * (s.E + 4*(s.E+2))
	scale := AttnShape{E: s.E}.scale()
	return rt.Launch(fmt.Sprintf("decode_attention_e%d", s.E), cuda.Dim3{X: r, Y: s.H}, cuda.D1(attThreads), shared,
		att, qkv, kc, vc, slot, pos, rows, r, s.H, s.G, s.Tmax, scale)
}
