//go:build nvrtc

package cuda_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// TestKernelsCompileToPTX compiles every kernel with NVRTC (no GPU
// needed: make cuda-check runs it with Debian's NVRTC 11.8) for the
// architectures of the GPUs the project runs on, and checks that each
// kernel of the sources is an entry of the PTX, without warnings or
// local-memory arrays; with the emulator in the
// build (tags nvrtc,cudaemu), also that each kernel's PTX parameters take
// the arguments the emulator reads from its C++ signature.
func TestKernelsCompileToPTX(t *testing.T) {
	for _, arch := range [][2]int{{8, 0}, {9, 0}} {
		ptx, warnings, err := cuda.CompilePTX(kernels.Program(), arch[0], arch[1])
		if err != nil {
			t.Fatal(err)
		}
		if warnings != "" {
			t.Errorf("compute_%d%d: NVRTC warns:\n%s", arch[0], arch[1], warnings)
		}
		entries := cuda.PTXEntries(ptx)
		for _, name := range kernels.Names() {
			if _, ok := entries[name]; !ok {
				t.Errorf("compute_%d%d: kernel %s is not in the PTX", arch[0], arch[1], name)
			}
		}
		if len(entries) != len(kernels.Names()) {
			t.Errorf("compute_%d%d: %d PTX entries, %d kernels in the sources", arch[0], arch[1], len(entries), len(kernels.Names()))
		}
		checkEmulatedParams(t, entries)
		if strings.Contains(ptx, ".local") {
			t.Errorf("compute_%d%d: some kernel keeps an array in local memory (an array indexed by a value the compiler cannot unroll)", arch[0], arch[1])
		}
	}
}

// TestPTXCache: the second compile of a program comes from the cache
// directory (a hit: even with NVRTC's input changed behind its back, the
// same PTX), another architecture or source misses it.
func TestPTXCache(t *testing.T) {
	dir := t.TempDir()
	p := cuda.Program{Name: "t.cu", Main: `extern "C" __global__ void k(float* x) { x[0] = 1; }`}
	first, err := cuda.CompilePTXCached(p, 8, 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.ptx"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one .ptx", files)
	}
	if err := os.WriteFile(files[0], []byte("cached"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := cuda.CompilePTXCached(p, 8, 0, dir); err != nil || again != "cached" {
		t.Errorf("second compile: %.40q, %v; want the cached file", again, err)
	}
	if other, err := cuda.CompilePTXCached(p, 9, 0, dir); err != nil || other == "cached" || !strings.Contains(other, ".entry k") {
		t.Errorf("compute_90: %.40q, %v; want a fresh compile", other, err)
	}
	p.Main += "\n"
	if other, err := cuda.CompilePTXCached(p, 8, 0, dir); err != nil || other != first {
		t.Errorf("another source: %.40q, %v; want a fresh compile", other, err)
	}
}
