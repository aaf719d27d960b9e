package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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
	if cl.HasRole(config.RoleLearner) || cl.HasRole(config.RoleAll) {
		return runExit(actors.Run(ctx, cfg, stdout), stderr)
	}
	return runExit(actors.Serve(ctx, cfg, stdout), stderr)
}

// maxIgnoredKeys bounds the keys workerIgnores names (a recipe sets
// dozens).
const maxIgnoredKeys = 8

// workerIgnores is the warning of a worker node (roles without the
// learner) whose configuration sets keys it takes from the learner's
// instead, naming them; "" for a trainer, or when there are none.
func workerIgnores(cl config.Cluster, src config.Sources) string {
	if cl.HasRole(config.RoleAll) || cl.HasRole(config.RoleLearner) {
		return ""
	}
	set, err := src.SetKeys()
	if err != nil {
		return ""
	}
	var ignored []string
	for _, key := range set {
		if !config.WorkerKey(key) {
			ignored = append(ignored, key)
		}
	}
	if len(ignored) == 0 {
		return ""
	}
	more := ""
	if n := len(ignored) - maxIgnoredKeys; n > 0 {
		ignored, more = ignored[:maxIgnoredKeys], fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("mgrpo-node: warning: a worker node runs the learner's configuration; not used here: %s%s (a worker's own are cluster.*, model.device, model.dtype, trace.file and its metrics' ports)",
		strings.Join(ignored, ", "), more)
}

// runExit prints a run's error as one line and returns its exit code:
// exitUsage for bad configuration, an address that cannot be bound or bad
// TLS files, exitStopped for an interrupted run, exitNoProgress for one
// stopped by skipped steps or a guard, exitFailed for any other error.
func runExit(err error, stderr io.Writer) int {
	var cfgErr *config.Error
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &cfgErr), errors.Is(err, node.ErrBind), errors.Is(err, meter.ErrBind), errors.Is(err, node.ErrTLS):
		fmt.Fprintln(stderr, errorLine(err))
		return exitUsage
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
