package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// TestRunConfigFileMatchesRunlog: config reads the file runlog writes.
func TestRunConfigFileMatchesRunlog(t *testing.T) {
	if config.RunConfigFile != runlog.ConfigFile {
		t.Fatalf("config.RunConfigFile = %q, runlog.ConfigFile = %q", config.RunConfigFile, runlog.ConfigFile)
	}
}

// TestResumeUsesTheRunsConfig trains a two-step tiny run, then resumes it
// with no flags but --resume and --train.steps: the run's own settings
// (tiny preset, 2 prompts × 2 completions) come from its config.yaml, not
// the defaults. A resume that changes the objective is refused with one
// line before anything runs.
func TestResumeUsesTheRunsConfig(t *testing.T) {
	out := t.TempDir()
	start := []string{"--model.preset", "tiny", "--train.warm_start_steps", "2", "--train.warm_start_batch", "8",
		"--train.steps", "2", "--train.prompts_per_step", "2", "--generation.num_generations", "2",
		"--train.eval_every", "0", "--train.eval_prompts", "4", "--output.dir", out, "--output.name", "r"}
	var stdout, stderr bytes.Buffer
	if code := runEnv(start, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("start: exit %d, stderr %q", code, stderr.String())
	}
	run := filepath.Join(out, "r")
	saved, err := os.ReadFile(filepath.Join(run, runlog.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}

	stdout.Reset()
	stderr.Reset()
	code := runEnv([]string{"--resume", run, "--maxent.objective", "maxent_listwise"}, nil, &stdout, &stderr)
	want := `config: maxent.objective = "maxent_listwise": cannot change on resume (the run was saved with "grpo"; start a new run to change it)` + "\n"
	if code != exitUsage || stderr.String() != want || stdout.Len() != 0 {
		t.Fatalf("changed objective: exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout.String(), stderr.String(), exitUsage, want)
	}

	stdout.Reset()
	stderr.Reset()
	if code := runEnv([]string{"--resume", run, "--train.steps", "3"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("extend: exit %d, stderr %q", code, stderr.String())
	}
	for _, w := range []string{"at step 2\n", "done: 3 steps"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("extend: stdout %q lacks %q", stdout.String(), w)
		}
	}
	if strings.Contains(stdout.String(), "warm start") {
		t.Errorf("extend: stdout %q shows a warm start", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(run, runlog.CheckpointsDir, "step-3")); err != nil {
		t.Errorf("extend: no step-3 checkpoint: %v", err)
	}
	if now, _ := os.ReadFile(filepath.Join(run, runlog.ConfigFile)); !bytes.Equal(now, saved) {
		t.Errorf("extend rewrote the run's config.yaml")
	}
}

// TestResumeWithoutCheckpointSaysWhatToDo: a run that has its warm start
// saved (reference/) but no checkpoint (killed between the two) cannot be
// resumed; the one line says to start a new run from the warm start.
func TestResumeWithoutCheckpointSaysWhatToDo(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := runEnv(quickRun(out, "r", "1"), nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("start: exit %d, stderr %q", code, stderr.String())
	}
	run := filepath.Join(out, "r")
	if err := os.RemoveAll(filepath.Join(run, runlog.CheckpointsDir)); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code := runEnv([]string{"--resume", run}, nil, &stdout, &stderr)
	want := "--model.checkpoint " + filepath.Join(run, runlog.ReferenceDir)
	if code != exitUsage || !strings.Contains(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("resume without a checkpoint: exit %d, stderr %q; want %d and one line with %q", code, stderr.String(), exitUsage, want)
	}
}

// TestRunExitCodes: an interrupted run exits 3, one stopped for skipped
// steps 4, any other failure 1, each with its one line on stderr.
func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{nil, exitOK},
		{fmt.Errorf("stopped at step 3: %w", actors.ErrInterrupted), exitStopped},
		{fmt.Errorf("stopped at step 3: 10 steps skipped: %w", actors.ErrNoProgress), exitNoProgress},
		{errors.New("disk full"), exitFailed},
	} {
		var stderr bytes.Buffer
		if code := runExit(tc.err, &stderr); code != tc.code || (tc.err != nil && stderr.String() != "mgrpo-node: "+tc.err.Error()+"\n") {
			t.Errorf("%v: exit %d, stderr %q; want %d and the error's line", tc.err, code, stderr.String(), tc.code)
		}
	}
}

// TestResumeRunOfAnEarlierBuild: a run as builds before manifests left it
// resumes: checkpoints whose COMPLETE reads "complete" with no manifest,
// config.yaml or guard state, a reference/ never sealed, and a config.yaml
// holding the retired key cluster.provider.
func TestResumeRunOfAnEarlierBuild(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := runEnv(quickRun(out, "r", "2", "--train.checkpoint_every", "1"), nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("start: exit %d, stderr %q", code, stderr.String())
	}
	run := filepath.Join(out, "r")
	ckpts, _ := filepath.Glob(filepath.Join(run, runlog.CheckpointsDir, "step-*"))
	for _, dir := range ckpts {
		for _, f := range []string{runlog.ManifestFile, runlog.ConfigFile, guard.StateFile} {
			os.Remove(filepath.Join(dir, f))
		}
		if err := os.WriteFile(filepath.Join(dir, runlog.CompleteFile), []byte("complete\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{runlog.ManifestFile, runlog.CompleteFile} {
		if err := os.Remove(filepath.Join(run, runlog.ReferenceDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(run, runlog.ConfigFile)
	text, err := os.ReadFile(cfg)
	if err != nil || !bytes.Contains(text, []byte("\ncluster:\n")) {
		t.Fatalf("config.yaml: %v, or no cluster section", err)
	}
	text = bytes.Replace(text, []byte("\ncluster:\n"), []byte("\ncluster:\n  provider: automanaged\n"), 1)
	if err := os.WriteFile(cfg, text, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := runEnv([]string{"--resume", run, "--train.steps", "3"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("resume: exit %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "at step 2") || !strings.Contains(stdout.String(), "done: 3 steps") {
		t.Errorf("resume: stdout %q, want it resumed at step 2 and done at 3", stdout.String())
	}
}

// TestResumeBelowTheRunsStep: a resume whose --train.steps is below the
// step the run is at says so in one line and exits 2, running nothing
// (it said "done: 2 steps" and exited 0); at that step, or with the
// run's own train.steps, a finished run says in one line that it is
// already done and exits 0, running and writing nothing (it evaluated
// the policy again and wrote its last checkpoint and report again).
func TestResumeBelowTheRunsStep(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := runEnv(quickRun(out, "r", "2"), nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("start: exit %d, stderr %q", code, stderr.String())
	}
	run := filepath.Join(out, "r")
	metrics, err := os.ReadFile(filepath.Join(run, runlog.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(run, runlog.CheckpointsDir, "step-2")
	report, err := os.Stat(filepath.Join(run, runlog.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	done := "already done at step 2 of 2 (greedy accuracy "
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--train.steps", "1"}, exitUsage, "", "config: train.steps = 1: the run is already at step 2 (" + ckpt + "); nothing was run (more than 2 extends it)\n"},
		{[]string{"--train.steps", "0"}, exitUsage, "", "config: train.steps = 0: the run is already at step 2 (" + ckpt + "); nothing was run (more than 2 extends it)\n"},
		{[]string{"--train.steps", "2"}, exitOK, done, ""},
		{nil, exitOK, done, ""},
	} {
		stdout.Reset()
		stderr.Reset()
		code := runEnv(append([]string{"--resume", run}, tc.args...), nil, &stdout, &stderr)
		if code != tc.code || stderr.String() != tc.stderr {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.stderr)
		}
		if tc.stdout != "" && (!strings.HasPrefix(stdout.String(), tc.stdout) || strings.Count(stdout.String(), "\n") != 1 || !strings.Contains(stdout.String(), "outputs in "+run)) {
			t.Errorf("%v: stdout %q; want one line starting %q and naming %s", tc.args, stdout.String(), tc.stdout, run)
		}
		if tc.stdout == "" && stdout.Len() != 0 {
			t.Errorf("%v: stdout %q; want nothing", tc.args, stdout.String())
		}
		now, _ := os.ReadFile(filepath.Join(run, runlog.MetricsFile))
		if info, err := os.Stat(filepath.Join(run, runlog.ReportFile)); !bytes.Equal(now, metrics) || err != nil || !info.ModTime().Equal(report.ModTime()) {
			t.Errorf("%v: metrics.jsonl changed %v, report.html rewritten %v; want nothing run", tc.args, !bytes.Equal(now, metrics), err != nil || !info.ModTime().Equal(report.ModTime()))
		}
	}
}
