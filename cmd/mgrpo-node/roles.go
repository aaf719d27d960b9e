package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/config"
)

// runRole runs the actors of cfg.Cluster.Role until the run ends or ctx
// is cancelled, and returns the exit code. Role all trains in this process
// (actors.Run): progress on stdout, errors on stderr.
func runRole(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	if cfg.Cluster.Role != config.RoleAll {
		fmt.Fprintf(stderr, "mgrpo-node: role %s: distributed roles are not implemented yet; use --role all\n", cfg.Cluster.Role)
		return exitFailed
	}
	if err := actors.Run(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node: %v\n", err)
		return exitFailed
	}
	return exitOK
}
