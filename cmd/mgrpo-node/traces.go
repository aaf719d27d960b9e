package main

import (
	"fmt"
	"io"
)

// runTraces runs `mgrpo-node traces`.
func runTraces(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mgrpo-node traces: not implemented yet")
	return exitFailed
}
