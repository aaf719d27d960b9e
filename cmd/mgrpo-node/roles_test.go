package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/config"
)

// TestRoleAllTrains runs a two-step tiny run through runRole and checks
// the exit code and the run directory.
func TestRoleAllTrains(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Preset = "tiny"
	cfg.Train.WarmStartSteps, cfg.Train.WarmStartBatch = 2, 8
	cfg.Train.Steps, cfg.Train.PromptsPerStep, cfg.Generation.NumGenerations = 2, 2, 2
	cfg.Train.EvalEvery, cfg.Train.EvalPrompts = 0, 4
	cfg.Output.Dir, cfg.Output.Name = t.TempDir(), "roles"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runRole(context.Background(), cfg, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(cfg.Output.Dir, "roles", "report.html")); err != nil {
		t.Errorf("no report: %v", err)
	}
	if !strings.Contains(stdout.String(), "done: 2 steps") {
		t.Errorf("stdout %q lacks the final line", stdout.String())
	}
}

// TestRoleNotImplemented: a cluster role fails with one line naming it.
func TestRoleNotImplemented(t *testing.T) {
	cfg := config.Default()
	cfg.Cluster.Role = config.RoleLearner
	var stdout, stderr bytes.Buffer
	if code := runRole(context.Background(), cfg, &stdout, &stderr); code != exitFailed || !strings.Contains(stderr.String(), "learner") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
