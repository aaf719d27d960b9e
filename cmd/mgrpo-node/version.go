package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/mgrpo/mgrpo/internal/buildinfo"
)

// runVersion prints the build (the version the Makefile stamped, or the
// module version and VCS revision if known; the SHA-256 of the executable,
// which cluster nodes compare), and the Go toolchain.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "mgrpo-node version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	fmt.Fprintf(stdout, "mgrpo-node %s %s %s/%s\n", buildinfo.ID(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
