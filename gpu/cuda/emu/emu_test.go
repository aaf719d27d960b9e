//go:build cudaemu

package emu

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// The emulator's own checks: what a GPU would not report, or not the same
// way. The CUDA semantics it shares with a GPU are tested in package
// kernels, on both.

func upload(t *testing.T, r *Runtime, s []float32) cuda.Ptr {
	t.Helper()
	p, err := cuda.UploadSlice(r, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBarrierMismatchIsAnError(t *testing.T) {
	r := New(0)
	defer r.Close()
	out, _ := r.Alloc(4 * 64)
	err := r.Launch("selftest_mismatch", cuda.D1(2), cuda.D1(64), 0, out)
	if err == nil || !strings.Contains(err.Error(), "__syncthreads") || !strings.Contains(err.Error(), "block (0,0,0)") {
		t.Fatalf("err = %v, want a __syncthreads mismatch in block (0,0,0)", err)
	}
	// the emulator is usable after a failed launch
	sum, _ := r.Alloc(8)
	if err := r.Launch("selftest_block_sum", cuda.D1(1), cuda.D1(32), 0, sum, upload(t, r, []float32{1, 2}), 2); err != nil {
		t.Fatal(err)
	}
}

func TestSharedMemoryStartsPoisoned(t *testing.T) {
	r := New(0)
	defer r.Close()
	out, _ := r.Alloc(4 * 32)
	if err := r.Launch("selftest_uninitialised", cuda.D1(1), cuda.D1(32), 0, out); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 32)
	if err := cuda.DownloadSlice(r, got, out); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("never-written __shared__ [%d] = %v, want NaN", i, v)
		}
	}
}

func TestLaunchChecksPointersAndShapes(t *testing.T) {
	r := New(0)
	defer r.Close()
	out, _ := r.Alloc(8)
	x := []float32{1}
	for _, tc := range []struct {
		name         string
		grid, block  cuda.Dim3
		shared       int
		args         []any
		wantContains string
	}{
		{"host pointer", cuda.D1(1), cuda.D1(32), 0, []any{out, cuda.Ptr(0x1234), 1}, "not device memory"},
		{"1025 threads", cuda.D1(1), cuda.D1(1025), 0, []any{out, out, 1}, "1024"},
		{"empty grid", cuda.D1(0), cuda.D1(32), 0, []any{out, out, 1}, "≥ 1"},
		{"too much shared", cuda.D1(1), cuda.D1(32), 300 << 10, []any{out, out, 1}, "shared"},
		{"partial warp", cuda.D1(1), cuda.D1(48), 0, []any{out, upload(t, r, x), 1}, "past the end of the block"},
		{"int too large", cuda.D1(1), cuda.D1(32), 0, []any{out, out, 1 << 40}, "does not fit"},
	} {
		err := r.Launch("selftest_block_sum", tc.grid, tc.block, tc.shared, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.wantContains) || !errors.Is(err, cuda.ErrLaunch) {
			t.Errorf("%s: err = %v, want ErrLaunch mentioning %q", tc.name, err, tc.wantContains)
		}
	}
}

func TestMemory(t *testing.T) {
	r := New(1 << 20)
	defer r.Close()
	p, err := r.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	if free, total, _ := r.MemInfo(); free != total-10 || total != 1<<20 {
		t.Errorf("MemInfo = %d, %d after a 10-byte alloc of 1 MiB", free, total)
	}
	if err := r.Upload(p, make([]byte, 11)); err == nil {
		t.Error("uploading 11 bytes into 10: no error")
	}
	if err := r.Memset(p.Add(2), 7, 8); err != nil {
		t.Fatal(err)
	}
	q, _ := r.Alloc(10)
	if err := r.Copy(q, p, 10); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 10)
	if err := r.Download(got, q); err != nil || got[1] == 7 || got[2] != 7 || got[9] != 7 {
		t.Errorf("after memset and copy: %v, %v", got, err)
	}
	if _, err := r.Alloc(2 << 20); err == nil {
		t.Error("allocating more than the total: no error")
	}
	if err := r.Free(p.Add(1)); err == nil {
		t.Error("freeing an inner pointer: no error")
	}
	if err := r.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := r.Download(got, p); err == nil {
		t.Error("reading freed memory: no error")
	}
}

// TestGemmRoundsAsTheMathMode: 1 + 2⁻¹² is exact in fp32 and rounds to 1
// in TF32 and bf16, so a 1×1×1 product shows which rounding ran.
func TestGemmRoundsAsTheMathMode(t *testing.T) {
	r := New(0)
	defer r.Close()
	x := float32(1 + 0x1p-12)
	one := upload(t, r, []float32{1})
	for _, tc := range []struct {
		math cuda.Math
		want float32
	}{{cuda.MathFP32, x}, {cuda.MathTF32, 1}, {cuda.MathBF16, 1}} {
		a := upload(t, r, []float32{x})
		b := one
		if tc.math == cuda.MathBF16 {
			a, _ = cuda.UploadSlice(r, []uint16{cuda.BF16(x)})
			b, _ = cuda.UploadSlice(r, []uint16{cuda.BF16(1)})
		}
		c := upload(t, r, []float32{0})
		g := cuda.Gemm{M: 1, N: 1, K: 1, Alpha: 1, A: a, B: b, C: c, LDA: 1, LDB: 1, LDC: 1, Math: tc.math}
		if err := r.Gemm(g); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 1)
		cuda.DownloadSlice(r, got, c)
		if got[0] != tc.want {
			t.Errorf("%v: (1+2⁻¹²)·1 = %v, want %v", tc.math, got[0], tc.want)
		}
	}
}

// TestWMMAMisuseIsAnError: what wmma.cuh's rules forbid (undefined on a
// GPU) ends the launch with an error naming it.
func TestWMMAMisuseIsAnError(t *testing.T) {
	r := New(0)
	defer r.Close()
	x, _ := r.Alloc(4 * 512)
	out, _ := r.Alloc(4 * 256)
	for how, want := range []string{"waits in load_matrix_sync while", "different matrices", "256-bit aligned", "multiple of 16 bytes"} {
		err := r.Launch("selftest_wmma_misuse", cuda.D1(1), cuda.D1(32), 0, out, x, how)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("how %d: err = %v, want one that says %q", how, err, want)
		}
	}
	err := r.Launch("selftest_wmma", cuda.D1(1), cuda.D1(16), 0, out, x, x, x, x, x)
	if err == nil || !strings.Contains(err.Error(), "past the end of the block") {
		t.Errorf("a WMMA operation in a partial warp: err = %v", err)
	}
}
