//go:build cuda || nvrtc

package cuda

import (
	"fmt"
	"sort"
	"strings"

	"gorgonia.org/cu/nvrtc"
)

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
