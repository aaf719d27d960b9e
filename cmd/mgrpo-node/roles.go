package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/config"
)

// runRole runs the actors of cfg.Cluster.Role until the run ends or ctx
// is cancelled, and returns the exit code. Role all, or any list with the
// learner, trains (actors.Run): progress on stdout, errors on stderr. A
// list of worker roles serves a learner's runs (actors.Serve) until ctx is
// cancelled.
func runRole(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	cl := cfg.Cluster
	if !cl.HasRole(config.RoleAll) && cl.Insecure {
		fmt.Fprintf(stderr, "mgrpo-node: warning: --cluster.insecure: nodes talk in plaintext on %s; anyone who reaches it can join\n", cl.Host)
	}
	var err error
	if cl.HasRole(config.RoleLearner) || cl.HasRole(config.RoleAll) {
		err = actors.Run(ctx, cfg, stdout)
	} else {
		err = actors.Serve(ctx, cfg, stdout)
	}
	var cfgErr *config.Error
	var stopped *actors.StoppedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &stopped):
		fmt.Fprintf(stderr, "mgrpo-node: %v\n", err)
		return exitGuard
	case errors.As(err, &cfgErr), errors.Is(err, node.ErrBind), errors.Is(err, meter.ErrBind), errors.Is(err, node.ErrTLS):
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "mgrpo-node: %v\n", err)
	return exitFailed
}
