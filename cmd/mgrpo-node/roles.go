package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/config"
)

// runRole runs the actors of cfg.Cluster.Role until the run ends or ctx
// is cancelled, and returns the exit code. Role all trains in this process
// (actors.Run): progress on stdout, errors on stderr (runExit).
func runRole(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	if cfg.Cluster.Role != config.RoleAll {
		fmt.Fprintf(stderr, "mgrpo-node: role %s: distributed roles are not implemented yet; use --role all\n", cfg.Cluster.Role)
		return exitFailed
	}
	return runExit(actors.Run(ctx, cfg, stdout), stderr)
}

// runExit prints a run's error as one line and returns its exit code:
// exitStopped for an interrupted run, exitNoProgress for one stopped by
// skipped steps, exitFailed for any other error.
func runExit(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "mgrpo-node: %s\n", errorLine(err))
	switch {
	case errors.Is(err, actors.ErrInterrupted):
		return exitStopped
	case errors.Is(err, actors.ErrNoProgress):
		return exitNoProgress
	}
	return exitFailed
}
