package main

import (
	"fmt"
	"io"
)

// runInit runs `mgrpo-node init`.
func runInit(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mgrpo-node init: not implemented yet")
	return exitFailed
}
