//go:build cuda || nvrtc

package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gorgonia.org/cu/nvrtc"
)

// PTXCacheEnv names a directory where Open keeps the PTX it compiles, by
// a hash of the program, the architecture and NVRTC's version, so that
// the next process that opens the same program skips NVRTC (seconds: a
// benchmark script starts many). Unset: no cache.
const PTXCacheEnv = "MGRPO_PTX_CACHE"

// CompilePTXCached is CompilePTX through the cache directory dir (none
// when empty): a hit returns the PTX compiled before (without warnings),
// a miss compiles and stores it. A cache that cannot be written is no
// error: the PTX is returned all the same.
func CompilePTXCached(p Program, major, minor int, dir string) (string, error) {
	if dir == "" {
		ptx, _, err := CompilePTX(p, major, minor)
		return ptx, err
	}
	vmaj, vmin, err := nvrtc.Version()
	if err != nil {
		return "", fmt.Errorf("cuda: nvrtc: version: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "nvrtc %d.%d compute_%d%d\x00%s\x00%s\x00", vmaj, vmin, major, minor, p.Name, p.Main)
	names := make([]string, 0, len(p.Headers))
	for n := range p.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", n, p.Headers[n])
	}
	path := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))+".ptx")
	if b, err := os.ReadFile(path); err == nil {
		return string(b), nil
	}
	ptx, _, err := CompilePTX(p, major, minor)
	if err != nil {
		return "", err
	}
	if os.MkdirAll(dir, 0o755) == nil {
		if f, err := os.CreateTemp(dir, "ptx-*"); err == nil {
			_, werr := f.WriteString(ptx)
			if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
				os.Remove(f.Name())
			}
		}
	}
	return ptx, nil
}

// CompilePTX compiles p with NVRTC for the virtual architecture
// compute_<major><minor> (C++17, IEEE division and square roots, fused
// multiply-adds allowed) and returns the PTX, which the driver compiles for
// the device when it loads it, and NVRTC's warnings (empty when clean). A
// compile error carries NVRTC's log.
func CompilePTX(p Program, major, minor int) (ptx, warnings string, err error) {
	names := make([]string, 0, len(p.Headers))
	for n := range p.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	headers := make([]nvrtc.Include, len(names))
	for i, n := range names {
		headers[i] = nvrtc.Include{Name: n, Source: p.Headers[n]}
	}
	prog, err := nvrtc.CreateProgram(p.Main, p.Name, headers...)
	if err != nil {
		return "", "", fmt.Errorf("cuda: nvrtc: create program: %w", err)
	}
	defer prog.Destroy()
	arch := fmt.Sprintf("--gpu-architecture=compute_%d%d", major, minor)
	err = prog.Compile(arch, "--std=c++17")
	log, _ := prog.GetLog()
	log = strings.TrimSpace(strings.TrimRight(log, "\x00"))
	if err != nil {
		return "", "", fmt.Errorf("cuda: nvrtc: compile %s for compute_%d%d: %w\n%s", p.Name, major, minor, err, log)
	}
	if ptx, err = prog.GetPTX(); err != nil {
		return "", "", fmt.Errorf("cuda: nvrtc: get PTX: %w", err)
	}
	return strings.TrimRight(ptx, "\x00"), log, nil
}
