package main

import (
	"fmt"
	"io"
)

// runEval runs `mgrpo-node eval`.
func runEval(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mgrpo-node eval: not implemented yet")
	return exitFailed
}
