package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// tinyRun makes runs/<name> with one complete checkpoint at step 3 holding
// a freshly initialised tiny model, and returns the run directory.
func tinyRun(t *testing.T) string {
	t.Helper()
	return tinyRunConfig(t, nil)
}

// tinyRunConfig is tinyRun with the run's config.yaml (none when nil).
func tinyRunConfig(t *testing.T, runCfg *config.Config) string {
	t.Helper()
	cfg, err := gpu.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := runlog.Create(t.TempDir(), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if runCfg != nil {
		text, err := runCfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if err := d.WriteConfig(text); err != nil {
			t.Fatal(err)
		}
	}
	model := runlog.Part{Name: "model", Write: func(dir string) error {
		return gpu.SaveCheckpoint(dir, m, tokenizer.NewChar())
	}}
	if _, err := d.SaveCheckpoint(runlog.TrainerState{Step: 3}, 0, model); err != nil {
		t.Fatal(err)
	}
	return d.Path()
}

func TestEvalPrintsJSON(t *testing.T) {
	run := tinyRun(t)
	var out, errb bytes.Buffer
	args := []string{"--checkpoint", run, "--task", "addition", "--n", "4", "--k", "2", "--seed", "3", "--max_new_tokens", "6"}
	if code := runEval(args, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("output is not one line: %q", out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v: %q", err, out.String())
	}
	for _, k := range []string{"checkpoint", "step", "task", "n", "k", "temperature", "seed", "greedy_accuracy",
		"pass_at_k", "mean_at_k", "coverage", "entropy_per_token"} {
		if _, ok := got[k]; !ok {
			t.Errorf("output lacks %q: %s", k, out.String())
		}
	}
	if got["step"] != 3.0 || got["n"] != 4.0 || got["k"] != 2.0 || got["task"] != "addition" ||
		got["checkpoint"] != filepath.Join(run, "checkpoints", "step-3") {
		t.Errorf("output %s: want step 3, n 4, k 2, task addition, checkpoint step-3", out.String())
	}
	// Same flags, same output (deterministic for a seed).
	var again bytes.Buffer
	runEval(args, &again, &errb)
	if again.String() != out.String() {
		t.Errorf("second run differs:\n%s\n%s", out.String(), again.String())
	}
}

func TestEvalTakesRunTask(t *testing.T) {
	cfg := config.Default()
	cfg.Task.Name = "countdown"
	cfg.Generation.MaxCompletionLen = 12 // countdown answers take up to 10 tokens + EOS
	run := tinyRunConfig(t, cfg)
	tests := []struct {
		args []string
		want string
	}{
		{nil, `"task":"countdown"`},
		{[]string{"--task", "addition"}, `"task":"addition"`},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"--checkpoint", run, "--n", "2", "--k", "1"}, tc.args...)
		if code := runEval(args, &out, &errb); code != exitOK {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, errb.String())
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: output %s, want %s", tc.args, out.String(), tc.want)
		}
	}
}

func TestEvalBareModelDir(t *testing.T) {
	cfg, _ := gpu.Preset("tiny")
	m, err := gpu.NewModel(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := gpu.SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runEval([]string{"--checkpoint", dir, "--n", "2", "--k", "1", "--max_new_tokens", "4"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), `"step":-1`) {
		t.Errorf("bare model dir: output %s, want step -1", out.String())
	}
}

// TestEvalRunReference: a run's reference/ (a sealed model directory, no
// trainer state) is evaluated as the model it holds, step -1, with the
// run's task.
func TestEvalRunReference(t *testing.T) {
	cfg := config.Default()
	cfg.Task.Name = "countdown"
	cfg.Generation.MaxCompletionLen = 12
	run := tinyRunConfig(t, cfg)
	ref := filepath.Join(run, runlog.ReferenceDir)
	model, _ := gpu.Preset("tiny")
	m, err := gpu.NewModel(model, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.SaveCheckpoint(ref, m, tokenizer.NewChar()); err != nil {
		t.Fatal(err)
	}
	if err := runlog.Seal(ref); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runEval([]string{"--checkpoint", ref, "--n", "2", "--k", "1"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{`"step":-1`, `"task":"countdown"`, `"checkpoint":"` + ref + `"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("reference/: output %s, want %s", out.String(), want)
		}
	}
}

func TestEvalBadInputExit2(t *testing.T) {
	run := tinyRun(t)
	partial := filepath.Join(t.TempDir(), "step-9")
	os.MkdirAll(partial, 0o755)
	os.WriteFile(filepath.Join(partial, runlog.TrainerStateFile), []byte(`{"format_version":1,"step":9}`), 0o644)
	tests := []struct {
		name string
		args []string
		want string // in the one error line
	}{
		{"no checkpoint flag", []string{"--task", "addition"}, "--checkpoint"},
		{"missing checkpoint", []string{"--checkpoint", "/nonexistent/run"}, "mgrpo-node eval: --checkpoint: /nonexistent/run: no such file or directory\n"},
		{"incomplete checkpoint", []string{"--checkpoint", partial}, "COMPLETE"},
		{"unknown task", []string{"--checkpoint", run, "--task", "chess"}, "chess"},
		{"unknown flag", []string{"--checkpoint", run, "--kk", "3"}, "kk"},
		{"bad n", []string{"--checkpoint", run, "--n", "0"}, "--n"},
		{"bad k", []string{"--checkpoint", run, "--k", "-1"}, "--k"},
		{"bad temperature", []string{"--checkpoint", run, "--temperature", "0"}, "--temperature"},
		{"tiny temperature", []string{"--checkpoint", run, "--temperature", "1e-45"}, "--temperature 1e-45: must be a finite number of at least 0.001"},
		{"infinite temperature", []string{"--checkpoint", run, "--temperature", "inf"}, "--temperature +Inf: must be a finite number"},
		{"not a number", []string{"--checkpoint", run, "--n", "many"}, "many"},
		{"stray argument", []string{"--checkpoint", run, "extra"}, "extra"},
		{"bad task option", []string{"--checkpoint", run, "--digits", "99"}, "digits"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := runEval(tc.args, &out, &errb)
		msg := errb.String()
		if code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) || out.Len() != 0 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 2 and one line naming %q", tc.name, code, msg, out.String(), tc.want)
		}
	}
}

func TestEvalHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runEval([]string{"--help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "--checkpoint") {
		t.Errorf("--help: exit %d, stdout %q", code, out.String())
	}
}
