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

// TestHalfWarps: the two halves of a warp in different warp operations at
// once, each on its half's mask, complete independently.
func TestHalfWarps(t *testing.T) {
	rt := cudatest.Open(t)
	const threads = 64
	out := cudatest.Alloc[int32](t, rt, 2*threads)
	cudatest.Must(t, rt.Launch("selftest_halves", cuda.D1(1), cuda.D1(threads), 0, out))
	got := cudatest.Download[int32](t, rt, out, 2*threads)
	for th := range threads {
		l, w := th%32, th/32
		var want [2]int32
		if l < 16 {
			want = [2]int32{int32(100*w + (l ^ 1)), 0x5555}
		} else {
			src := l + 2
			if src >= 32 {
				src = l
			}
			want = [2]int32{int32(100*w + src), 0x11110000}
		}
		if got[2*th] != want[0] || got[2*th+1] != want[1] {
			t.Errorf("thread %d: shuffle, ballot = %d, %#x; want %d, %#x", th, got[2*th], uint32(got[2*th+1]), want[0], uint32(want[1]))
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

// wmmaWant is selftest_wmma's out, in float64 from its inputs, and each
// element's scale Σ|a·b| + |c| (what its fp32 rounding is relative to).
func wmmaWant(a16, b16 []uint16, a32, b32, c []float32) (want, scale []float64) {
	want, scale = make([]float64, 1024), make([]float64, 1024)
	h := func(x uint16) float64 { return float64(cuda.BF16ToFloat32(x)) }
	type layout struct {
		a, b, cd func(r, k int) int // index of A(r, k), B(k, n) as (k, n), C and D (r, n)
		a16      bool
	}
	rowM := func(ld int) func(int, int) int { return func(i, j int) int { return i*ld + j } }
	colM := func(ld int) func(int, int) int { return func(i, j int) int { return j*ld + i } }
	for part, l := range []layout{
		{rowM(24), colM(24), rowM(16), true}, {colM(24), rowM(24), colM(16), true},
		{rowM(20), rowM(20), rowM(16), false}, {colM(20), colM(20), colM(16), false},
	} {
		for r := range 16 {
			for n := range 16 {
				s, abs := float64(c[l.cd(r, n)]), math.Abs(float64(c[l.cd(r, n)]))
				for k := range 16 {
					var p float64
					if l.a16 {
						p = h(a16[l.a(r, k)]) * h(b16[l.b(k, n)])
					} else {
						p = float64(a32[l.a(r, k)]) * float64(b32[l.b(k, n)])
					}
					s += p
					abs += math.Abs(p)
				}
				want[256*part+l.cd(r, n)], scale[256*part+l.cd(r, n)] = s, abs
			}
		}
	}
	return want, scale
}

// TestWMMA: the tensor-core products of wmma.cuh in every layout, bf16
// and TF32 (exact TF32 inputs), against float64 within 2⁻¹⁸ of each
// element's scale (fp32 sums of 16 products; the GPU's order and internal
// precision are its own).
func TestWMMA(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(5, 6))
	a16, b16 := make([]uint16, 16*24), make([]uint16, 16*24)
	a32, b32, c := make([]float32, 16*20), make([]float32, 16*20), make([]float32, 256)
	for i := range a16 {
		a16[i], b16[i] = cuda.BF16(float32(rng.NormFloat64())), cuda.BF16(float32(rng.NormFloat64()))
	}
	for i := range a32 {
		a32[i], b32[i] = cuda.TF32(float32(rng.NormFloat64())), cuda.TF32(float32(rng.NormFloat64()))
	}
	for i := range c {
		c[i] = float32(rng.NormFloat64())
	}
	out := cudatest.Alloc[float32](t, rt, 1024)
	cudatest.Must(t, rt.Launch("selftest_wmma", cuda.D1(1), cuda.D1(32), 0, out, cudatest.Upload(t, rt, a16),
		cudatest.Upload(t, rt, b16), cudatest.Upload(t, rt, a32), cudatest.Upload(t, rt, b32), cudatest.Upload(t, rt, c)))
	got := cudatest.Download[float32](t, rt, out, 1024)
	want, scale := wmmaWant(a16, b16, a32, b32, c)
	parts := []string{"bf16 row·col", "bf16 col·row", "TF32 row·row", "TF32 col·col"}
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); !(d <= 0x1p-18*scale[i]) {
			t.Fatalf("%s: out[%d] = %v, want %v (|diff| %.3g > 2⁻¹⁸·%.3g)", parts[i/256], i%256, got[i], w, d, scale[i])
		}
	}
}

// TestWMMAMapping: scaling an accumulator's rows through memory (a
// fragment of row factors, multiplied element by element) is exact on any
// mapping of elements to lanes; assuming a mapping (selftest_wmma_rowscale
// guess 1) is wrong on the emulator, whose mapping is scrambled so that a
// kernel that depends on it fails its tests there. On a GPU the test only
// reports whether the guess is the device's mapping.
func TestWMMAMapping(t *testing.T) {
	rt := cudatest.Open(t)
	rng := rand.New(rand.NewPCG(7, 8))
	x, f := make([]float32, 256), make([]float32, 16)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range f {
		f[i] = float32(1 + rng.Float64())
	}
	dx, df := cudatest.Upload(t, rt, x), cudatest.Upload(t, rt, f)
	matches := func(guess int) bool {
		out := cudatest.Alloc[float32](t, rt, 256)
		cudatest.Must(t, rt.Launch("selftest_wmma_rowscale", cuda.D1(1), cuda.D1(32), 0, out, dx, df, guess))
		for i, v := range cudatest.Download[float32](t, rt, out, 256) {
			if v != x[i]*f[i/16] {
				return false
			}
		}
		return true
	}
	if !matches(0) {
		t.Error("rows scaled through a fragment of row factors: not x·f bit for bit")
	}
	guess := matches(1)
	if !cudatest.OnDevice && guess {
		t.Error("a kernel that assumes the fragments' mapping gives the right answer on the emulator: its mapping exposes nothing")
	}
	t.Logf("a kernel that assumes sm_80's m16n8k16 accumulator mapping is right: %v (the emulator's mapping is scrambled)", guess)
}
