package kernels

import (
	"embed"
	"regexp"
	"sort"
	"strings"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

//go:embed *.cu *.cuh
var sources embed.FS

// mainFile is the translation unit; it includes every other file.
const mainFile = "mgrpo.cu"

// Program returns the kernels' source for NVRTC: mgrpo.cu and the files it
// includes.
func Program() cuda.Program {
	p := cuda.Program{Name: mainFile, Headers: map[string]string{}}
	entries, _ := sources.ReadDir(".")
	for _, e := range entries {
		b, _ := sources.ReadFile(e.Name())
		if e.Name() == mainFile {
			p.Main = string(b)
		} else {
			p.Headers[e.Name()] = string(b)
		}
	}
	return p
}

// kernelRE matches a kernel's definition.
var kernelRE = regexp.MustCompile(`extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(`)

// Names lists every kernel defined in the sources, sorted.
func Names() []string {
	var names []string
	p := Program()
	for _, text := range append([]string{p.Main}, values(p.Headers)...) {
		for _, m := range kernelRE.FindAllStringSubmatch(text, -1) {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}

func values(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// Included lists the files mgrpo.cu includes, in order.
func Included() []string {
	var out []string
	for _, line := range strings.Split(Program().Main, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), `#include "`); ok {
			out = append(out, strings.TrimSuffix(name, `"`))
		}
	}
	return out
}
