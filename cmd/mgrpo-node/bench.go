package main

import (
	"fmt"
	"io"
)

// runBench runs `mgrpo-node bench`.
func runBench(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mgrpo-node bench: not implemented yet")
	return exitFailed
}
