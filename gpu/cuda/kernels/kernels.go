// Package kernels holds the CUDA C kernels of mgrpo's CUDA engine
// (mgrpo.cu and the files it includes), embedded so that every runtime
// gets the same source, and a typed Go launcher per kernel with its launch
// shape.
//
// The real runtime (cuda.Open, build tag cuda) compiles Program with NVRTC
// for the device at start; the emulator (package emu, build tag cudaemu)
// compiles the same files as C++ with emu.h, which is why the emulator's
// C++ half (emu*.cc, emu*.h, emu.go) lives here: Go rebuilds a cgo package
// when a file it embeds changes, not when a header outside its directory
// does.
//
// Each kernel is a twin of a CPU kernel of package gpu and says which; the
// tests in package gpu (cuda_*_test.go, tags cuda or cudaemu) check each
// against its twin. Kernels never use float atomics: two runs of a launch
// give the same bits.
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
