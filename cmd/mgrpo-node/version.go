package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/buildinfo"
)

// runVersion prints the build (the version the Makefile stamped, or the
// module version and VCS revision if known; the SHA-256 of the executable,
// which cluster nodes compare), and the Go toolchain; a GPU build adds
// "cuda" and, when it shares its twin's identity (make build-cuda), its
// own file's hash.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "mgrpo-node version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	id, build := buildinfo.ID(), ""
	if gpu.CUDABuilt {
		build = " cuda"
		if own := buildinfo.Executable(); !strings.HasSuffix(id, own) {
			build += " (this file " + own + ")"
		}
	}
	fmt.Fprintf(stdout, "mgrpo-node %s %s %s/%s%s\n", id, runtime.Version(), runtime.GOOS, runtime.GOARCH, build)
	return exitOK
}
