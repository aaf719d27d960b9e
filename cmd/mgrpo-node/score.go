package main

import (
	"fmt"
	"io"
)

// runScore runs `mgrpo-node score`.
func runScore(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mgrpo-node score: not implemented yet")
	return exitFailed
}
