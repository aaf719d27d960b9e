package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/config"
)

// runRole runs the actors of cfg.Cluster.Role until the run ends or ctx
// is cancelled, and returns the exit code.
func runRole(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "mgrpo-node: role %s: not implemented yet\n", cfg.Cluster.Role)
	return exitFailed
}
