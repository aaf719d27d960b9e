package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// TestRoleLearnerPortTaken: a learner whose membership port is taken
// exits 2 with one line naming the port, before any run directory exists.
func TestRoleLearnerPortTaken(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := lis.Addr().(*net.TCPAddr).Port
	cfg := config.Default()
	cfg.Cluster.Role = config.RoleLearner
	cfg.Cluster.Host, cfg.Cluster.Port = "127.0.0.1", port
	cfg.Output.Dir, cfg.Output.Name = t.TempDir(), "taken"
	var stdout, stderr bytes.Buffer
	code := runRole(context.Background(), cfg, &stdout, &stderr)
	line := strings.TrimSpace(stderr.String())
	if code != exitUsage || strings.Count(line, "\n") > 0 || !strings.Contains(line, strconv.Itoa(port)) {
		t.Fatalf("exit %d, stderr %q; want exit %d and one line naming port %d", code, stderr.String(), exitUsage, port)
	}
	if _, err := os.Stat(filepath.Join(cfg.Output.Dir, "taken")); err == nil {
		t.Errorf("a run directory was created for a node that could not start")
	}
}
