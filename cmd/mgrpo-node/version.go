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
	if code, done := noArgs("version", "print the build (version and the executable's SHA-256), the Go toolchain and the platform", args, stdout, stderr); done {
		return code
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

// noArgs checks the arguments of a subcommand that takes none: -h or
// --help prints its usage (exit 0), anything else is a usage error. done
// says the subcommand ends with code.
func noArgs(name, usage string, args []string, stdout, stderr io.Writer) (code int, done bool) {
	switch {
	case len(args) == 0:
		return exitOK, false
	case args[0] == "-h" || args[0] == "--help":
		fmt.Fprintf(stdout, "usage: mgrpo-node %s\n  %s\n", name, usage)
		return exitOK, true
	}
	fmt.Fprintf(stderr, "mgrpo-node %s: unexpected argument %q\n", name, args[0])
	return exitUsage, true
}
