//go:build cuda || cudaemu

package kernels_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/cudatest"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// These tests hold a runtime to CUDA's semantics: on the emulator they
// test the emulator; on a GPU the same expectations show that the emulator
// models the device.

// butterfly is warp_sum as common.cuh computes it, lane by lane.
func butterfly(v [32]float32) float32 {
	for o := 16; o > 0; o >>= 1 {
		var next [32]float32
		for l := range v {
			next[l] = v[l] + v[l^o]
		}
		v = next
	}
	return v[0]
}

// blockSumModel is selftest_block_sum's sum in its exact order.
func blockSumModel(x []float32, threads int) float32 {
	warps := threads / 32
	var part [32]float32
	for w := range warps {
		var v [32]float32
		for l := range v {
			for i := w*32 + l; i < len(x); i += threads {
				v[l] += x[i]
			}
		}
		part[w] = butterfly(v)
	}
	return butterfly(part)
}

func TestBlockReductions(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ n, threads int }{{1, 32}, {1000, 96}, {4099, 256}, {50, 1024}} {
		x := make([]float32, tc.n)
		want := float32(math.Inf(-1))
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			want = max(want, x[i])
		}
		out := cudatest.Alloc[float32](t, rt, 2)
		cudatest.Must(t, rt.Launch("selftest_block_sum", cuda.D1(1), cuda.D1(tc.threads), 0, out, cudatest.Upload(t, rt, x), tc.n))
		got := cudatest.Download[float32](t, rt, out, 2)
		if sum := blockSumModel(x, tc.threads); got[0] != sum || got[1] != want {
			t.Errorf("n=%d threads=%d: sum, max = %v, %v; want %v, %v (bit for bit)", tc.n, tc.threads, got[0], got[1], sum, want)
		}
	}
}

// warpModel is what selftest_warp writes for thread t (CUDA's semantics
// of each warp operation).
func warpModel(t int) [8]int32 {
	l, w := t%32, t/32
	val := func(lane int) int32 { return int32(100*w + lane) }
	seg := func(src, width int) int32 { // a shuffle within segments of width lanes
		if src < l&^(width-1) || src >= l&^(width-1)+width {
			return val(l)
		}
		return val(src)
	}
	var ballot, all int32 = 0, 2
	for i := 0; i < 32; i += 3 {
		ballot |= 1 << i
	}
	return [8]int32{val((7*l + 3) % 32), val(l ^ 5), seg(l+3, 32), seg(l-3, 32), seg(l^6, 8), seg(l+2, 8), ballot, 1 + all}
}

func TestWarpOperations(t *testing.T) {
	rt := cudatest.Open(t)
	const threads = 64
	out := cudatest.Alloc[int32](t, rt, 8*threads)
	cudatest.Must(t, rt.Launch("selftest_warp", cuda.D1(1), cuda.D1(threads), 0, out))
	got := cudatest.Download[int32](t, rt, out, 8*threads)
	names := []string{"shfl", "shfl_xor 5", "shfl_down 3", "shfl_up 3", "shfl_xor 6 width 8", "shfl_down 2 width 8", "ballot", "any+2·all"}
	for th := range threads {
		want := warpModel(th)
		for k := range want {
			if got[8*th+k] != want[k] {
				t.Errorf("thread %d %s = %d, want %d", th, names[k], got[8*th+k], want[k])
			}
		}
	}
}

func TestDynamicSharedMemory(t *testing.T) {
	rt := cudatest.Open(t)
	const n = 96
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	out := cudatest.Alloc[float32](t, rt, n)
	cudatest.Must(t, rt.Launch("selftest_reverse", cuda.D1(1), cuda.D1(n), 4*n, out, cudatest.Upload(t, rt, x)))
	for i, v := range cudatest.Download[float32](t, rt, out, n) {
		if v != float32(n-1-i) {
			t.Fatalf("out[%d] = %v, want %d", i, v, n-1-i)
		}
	}
}

// bf16Exact rounds x to bfloat16 with math/big (8 significant bits, to
// nearest even), independently of cuda.BF16's bit trick.
func bf16Exact(x float32) float32 {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || x == 0 {
		return x
	}
	f, _ := new(big.Float).SetMode(big.ToNearestEven).SetPrec(8).SetFloat64(float64(x)).Float32()
	if math.Abs(float64(x)) < 0x1p-126 { // subnormal: bf16 keeps 7 bits below 2^-126
		q := float64(x) / 0x1p-133
		return float32(math.RoundToEven(q) * 0x1p-133)
	}
	return f
}

func TestBF16Rounding(t *testing.T) {
	rt := cudatest.Open(t)
	x := []float32{0, -0, 1, -1, 1.00390625, 1.01171875, 1.0078125, 3.14159265, 65504, 3.3895314e38, math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40, 1.5e-45, 0x1p-126, 0x1.fep-127}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 4000 {
		x = append(x, math.Float32frombits(rng.Uint32()&^0x7f800000|uint32(rng.IntN(254)+1)<<23))
	}
	n := len(x)
	out := cudatest.Alloc[uint16](t, rt, n)
	cudatest.Must(t, kernels.F32ToBF16(rt, out, cudatest.Upload(t, rt, x), n))
	got := cudatest.Download[uint16](t, rt, out, n)
	for i, v := range x {
		want := cuda.BF16(v)
		if got[i] != want {
			t.Fatalf("f32_to_bf16(%g) = %#04x, want %#04x (cuda.BF16)", v, got[i], want)
		}
		if e := bf16Exact(v); cuda.BF16ToFloat32(want) != e {
			t.Fatalf("cuda.BF16(%g) = %g, math/big rounds to %g", v, cuda.BF16ToFloat32(want), e)
		}
	}
	nan := cudatest.Alloc[uint16](t, rt, 1)
	cudatest.Must(t, kernels.F32ToBF16(rt, nan, cudatest.Upload(t, rt, []float32{float32(math.NaN())}), 1))
	if got := cudatest.Download[uint16](t, rt, nan, 1)[0]; got != 0x7fff {
		t.Errorf("f32_to_bf16(NaN) = %#04x, want 0x7fff", got)
	}
}

func TestLaunchErrors(t *testing.T) {
	rt := cudatest.Open(t)
	err := rt.Launch("no_such_kernel", cuda.D1(1), cuda.D1(32), 0)
	if err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("launching an unknown kernel: err = %v", err)
	}
	out := cudatest.Alloc[float32](t, rt, 2)
	for _, args := range [][]any{{out}, {out, out, 1.5}, {out, out, int64(1)}} {
		if err := rt.Launch("selftest_block_sum", cuda.D1(1), cuda.D1(32), 0, args...); err == nil {
			t.Errorf("selftest_block_sum%v: no error for wrong arguments", args)
		}
	}
}
