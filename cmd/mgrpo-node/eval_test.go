package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/evaluate"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/rewards/tasks"
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
		// More than any machine holds: refused before a problem is drawn
		// (--n 10^12 died allocating them, --k 10^12 exited 1).
		{"absurd n", []string{"--checkpoint", run, "--n", "1000000000000"}, "mgrpo-node eval: --n 1000000000000: 1000000000000 problems with 9 completions each (greedy and --k 8) need at least "},
		{"absurd k", []string{"--checkpoint", run, "--n", "2", "--k", "1000000000000"}, "mgrpo-node eval: --k 1000000000000: one problem's 1000000000001 completions need at least "},
		{"absurd n and k", []string{"--checkpoint", run, "--n", "1000000000000", "--k", "1000000000000"}, "--k 1000000000000"},
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

// TestCheckEvalSize: an evaluation is refused when its problems and
// completions (64 bytes each, a greedy one and k samples per problem)
// exceed the memory available, naming the most --n that could fit, or
// --k when not one problem fits; a data set's rows cap --n.
func TestCheckEvalSize(t *testing.T) {
	gen, err := tasks.New("addition", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "d.jsonl")
	if err := os.WriteFile(path, []byte("{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := evalTask(evalArgs{task: "addition", dataset: path})
	if err != nil {
		t.Fatal(err)
	}
	gb := gpu.MemoryReading{Machine: 1e9, Known: true}
	tests := []struct {
		name string
		task tasks.Task
		n, k int
		mem  gpu.MemoryReading
		want string // "" = fits
	}{
		{"fits", gen, 200, 8, gb, ""},
		{"too many problems", gen, 1e12, 8, gb, "--n 1000000000000: 1000000000000 problems with 9 completions each (greedy and --k 8) need at least "},
		{"the most that fits", gen, 1e12, 8, gb, "; this machine has 1.0 GB available (--n "},
		{"too many samples", gen, 1, 1e12, gb, "--k 1000000000000: one problem's 1000000000001 completions need at least 64000 GB; this machine has 1.0 GB available"},
		{"a data set's rows cap n", rows, 1e12, 8, gb, ""},
		{"memory unknown, small", gen, 1e6, 8, gpu.MemoryReading{}, ""},
		{"memory unknown, more than any machine", gen, 1e18, 8, gpu.MemoryReading{}, "no machine has"},
	}
	for _, tc := range tests {
		a := evalArgs{opts: evaluate.Options{N: tc.n, K: tc.k, Seed: 1}}
		err := checkEvalSize(tc.task, a, tc.mem)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// The most --n named fits, and one more does not.
	err = checkEvalSize(gen, evalArgs{opts: evaluate.Options{N: 1e12, K: 8, Seed: 1}}, gb)
	var most int
	if _, serr := fmt.Sscanf(err.Error()[strings.LastIndex(err.Error(), "(--n "):], "(--n %d", &most); serr != nil {
		t.Fatalf("%v: no --n named: %v", err, serr)
	}
	for n, fits := range map[int]bool{most: true, most + 1: false} {
		if err := checkEvalSize(gen, evalArgs{opts: evaluate.Options{N: n, K: 8, Seed: 1}}, gb); (err == nil) != fits {
			t.Errorf("--n %d: %v, want fits %v", n, err, fits)
		}
	}
}

// failWriter fails every write as a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestEvalResultNotWritten: a result that cannot be written is one line
// and exit 1 (stdout on a full disk exited 0), and leaves no file; a
// --out that cannot take a file is refused before the evaluation; --out
// writes the JSON line and says so.
func TestEvalResultNotWritten(t *testing.T) {
	run := tinyRun(t)
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--checkpoint", run, "--n", "2", "--k", "1", "--max_new_tokens", "4"}
	tests := []struct {
		name   string
		stdout io.Writer
		out    string // --out
		want   string // the last stderr line
	}{
		{"stdout full", failWriter{}, "", "mgrpo-node eval: write the result to stdout: no space left on device"},
		{"out in a missing directory", nil, filepath.Join(dir, "missing", "r.json"),
			"mgrpo-node eval: --out " + filepath.Join(dir, "missing", "r.json") + ": cannot create a file in " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"out under a file", nil, filepath.Join(notDir, "r.json"), "cannot create a file in " + notDir + ": not a directory"},
		{"out is a directory", nil, dir, "mgrpo-node eval: --out " + dir + ": is a directory"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		w := tc.stdout
		if w == nil {
			w = &stdout
		}
		a := args
		if tc.out != "" {
			a = append(append([]string{}, args...), "--out", tc.out)
		}
		code := runEval(a, w, &stderr)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != exitFailed || lines[len(lines)-1] != tc.want && !strings.Contains(lines[len(lines)-1], tc.want) || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 1 and the line %q", tc.name, code, stderr.String(), stdout.String(), tc.want)
		}
		if tc.out != "" && len(lines) != 1 {
			t.Errorf("%s: stderr %q; want one line, before the evaluation", tc.name, stderr.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left in the directory: %v, want only the file put there", entries)
	}

	out := filepath.Join(dir, "result.json")
	var stdout, stderr bytes.Buffer
	if code := runEval(append(args, "--out", out), &stdout, &stderr); code != exitOK || stdout.String() != "wrote "+out+"\n" {
		t.Fatalf("--out: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	var got map[string]any
	if data, err := os.ReadFile(out); err != nil || json.Unmarshal(data, &got) != nil || got["step"] != 3.0 || !bytes.HasSuffix(data, []byte("}\n")) {
		t.Errorf("--out file: %q, %v; want the JSON line of step 3", data, err)
	}
}

// TestLongEvalSignalStops builds the binary and interrupts an evaluation
// with SIGINT, SIGTERM and SIGHUP while it samples: each exits 3 at once
// with one line saying how far it got, and no --out file (it exited 1
// with "context canceled" after the sampling call in flight, and SIGHUP
// killed it).
func TestLongEvalSignalStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it; run without -short")
	}
	bin := buildBinary(t)
	run := tinyRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := regexp.MustCompile(`^mgrpo-node eval: interrupted after sampling \d+ of 200000 prompts \(100000 problems, greedy then --k 16\); nothing written$`)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		dir := t.TempDir()
		cmd := exec.CommandContext(ctx, bin, "eval", "--checkpoint", run, "--n", "100000", "--k", "16", "--out", filepath.Join(dir, "r.json"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stderr)
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), "evaluating ") {
			t.Fatalf("%v: first stderr line %q, want the evaluating line; %v", sig, lines.Text(), cmd.Wait())
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		var rest []string
		for lines.Scan() {
			rest = append(rest, lines.Text())
		}
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != exitStopped {
			t.Errorf("%v: wait: %v, want exit status %d", sig, err, exitStopped)
		}
		if len(rest) != 1 || !want.MatchString(rest[0]) {
			t.Errorf("%v: stderr after the first line %q, want one line matching %s", sig, rest, want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v: left %v in the --out directory", sig, entries)
		}
	}
}

// TestLongEvalWriteFails builds the binary and runs eval where its
// result cannot be written: --out with a file size limit of 0 (as a full
// disk: the write fails, EFBIG) over an older result, which stays whole
// and alone; stdout on /dev/full (it exited 0).
func TestLongEvalWriteFails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it; run without -short")
	}
	bin := buildBinary(t)
	run := tinyRun(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	if err := os.WriteFile(out, []byte("older\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	args := []string{"eval", "--checkpoint", run, "--n", "2", "--k", "1", "--max_new_tokens", "4"}
	tests := []struct {
		name   string
		cmd    *exec.Cmd
		stdout *os.File
		want   string
	}{
		{"--out over the size limit", exec.Command("sh", append([]string{"-c", `ulimit -f 0 && exec "$0" "$@"`, bin}, append(args, "--out", out)...)...), nil,
			"mgrpo-node eval: --out " + out + ": file too large; nothing written"},
		{"stdout on /dev/full", exec.Command(bin, args...), full, "mgrpo-node eval: write the result to stdout: no space left on device"},
	}
	for _, tc := range tests {
		var stderr bytes.Buffer
		tc.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		tc.cmd.Stderr = &stderr // a pipe: the size limit does not reach it
		if tc.stdout != nil {
			tc.cmd.Stdout = tc.stdout
		}
		err := tc.cmd.Run()
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || lines[len(lines)-1] != tc.want {
			t.Errorf("%s: %v, stderr %q; want exit 1 and %q", tc.name, err, stderr.String(), tc.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if data, _ := os.ReadFile(out); string(data) != "older\n" || len(entries) != 1 {
		t.Errorf("--out after the failed write: %q, directory %v; want the older result alone", data, entries)
	}
}
