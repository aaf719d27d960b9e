package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mgrpo/mgrpo/config"
)

// TestBadConfigRefusedAtStart: settings that once got past the start and
// then failed (exit 1 with a wrapped runtime error), crashed out of memory
// or panicked are refused before the run writes anything, with one line
// naming the key and exit 2: model dimensions past gpu's bounds, an
// unusable model.checkpoint or task.dataset, a trace.file that cannot be
// written, a value whose memory the plan did not count, an output.name
// that is no directory name.
func TestBadConfigRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	notJSONL := filepath.Join(dir, "bad.jsonl")
	emptyCkpt := filepath.Join(dir, "ckpt")
	fifo := filepath.Join(dir, "pipe.jsonl")
	for _, err := range []error{os.WriteFile(notJSONL, []byte("not json\n"), 0o644), os.Mkdir(emptyCkpt, 0o755), syscall.Mkfifo(fifo, 0o644)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, key string
		args      []string
	}{
		{"hidden past the bound", "model.hidden", []string{"--model.hidden", "1000000000"}},
		{"layers past the bound", "model.layers", []string{"--model.layers", "100000000"}},
		{"context past the bound", "model.context", []string{"--model.context", "2000000000"}},
		{"heads not dividing hidden", "model.hidden", []string{"--model.heads", "7"}},
		{"missing checkpoint", "model.checkpoint", []string{"--model.checkpoint", filepath.Join(dir, "nope")}},
		{"checkpoint without config.json", "model.checkpoint", []string{"--model.checkpoint", emptyCkpt}},
		{"missing dataset", "task.dataset", []string{"--task.dataset", filepath.Join(dir, "nope.jsonl")}},
		{"dataset a directory", "task.dataset", []string{"--task.dataset", dir}},
		{"dataset not JSONL", "task.dataset", []string{"--task.dataset", notJSONL}},
		{"dataset a named pipe", "task.dataset", []string{"--task.dataset", fifo}},
		{"missing eval dataset", "task.eval_dataset", []string{"--task.dataset", notJSONL, "--task.eval_dataset", filepath.Join(dir, "nope.jsonl")}},
		{"trace file in a missing directory", "trace.file", []string{"--trace.file", filepath.Join(dir, "no", "spans.jsonl")}},
		{"trace file a directory", "trace.file", []string{"--trace.file", dir}},
		{"trace file under a file", "trace.file", []string{"--trace.file", filepath.Join(notJSONL, "spans.jsonl")}},
		{"eval prompts out of memory", "train.eval_prompts", []string{"--train.eval_prompts", "1000000000"}},
		{"warm start batch out of memory", "train.warm_start_batch", []string{"--train.warm_start_batch", "1000000000"}},
		{"staleness out of memory", "train.max_staleness", []string{"--train.max_staleness", "1000000000", "--train.steps", "1000000000"}},
		{"run name ..", "output.name", []string{"--output.name", ".."}},
		{"hidden run name", "output.name", []string{"--output.name", ".r"}},
		{"run name with a newline", "output.name", []string{"--output.name", "r\nx"}},
		{"run name too long", "output.name", []string{"--output.name", strings.Repeat("r", 201)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := append(quickRun(out, "r", "2"), tc.args...)
			var stdout, stderr bytes.Buffer
			if code := runEnv(args, nil, &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUsage, stderr.String())
			}
			assertOneLine(t, stderr.String(), tc.key)
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("the refused run left %s in the output directory", entries[0].Name())
			}
		})
	}
}

// TestWorkerBadTraceFile: a worker node's own trace.file that cannot be
// written is refused at start with one line naming the key (exit 2),
// before the node looks for its learner.
func TestWorkerBadTraceFile(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--role", "generator", "--cluster.seeds", "127.0.0.1:1", "--trace.file", filepath.Join(dir, "no", "spans.jsonl")}
	var stdout, stderr bytes.Buffer
	if code := runEnv(args, nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr.String())
	}
	assertOneLine(t, stderr.String(), "trace.file")
	if stdout.Len() > 0 {
		t.Errorf("the refused node said %q", stdout.String())
	}
}

// TestWorkerIgnores: a worker node started with settings the learner's
// configuration decides says which in one line (it ignored them without a
// word); a trainer, or a worker setting only its own keys, says nothing.
func TestWorkerIgnores(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"trainer", []string{"--generation.temperature", "0.5"}, nil, ""},
		{"worker, own keys", []string{"--role", "generator", "--cluster.seeds", "h:1", "--model.device", "cpu", "--trace.file", "s.jsonl"}, nil, ""},
		{"worker", []string{"--role", "generator", "--cluster.seeds", "h:1", "--generation.temperature", "0.5", "--resume", "runs/x"}, []string{"MGRPO_TRAIN__STEPS=3"},
			"mgrpo-node: warning: a worker node runs the learner's configuration; not used here: generation.temperature, train.resume, train.steps (a worker's own are cluster.*, model.device, model.dtype, trace.file and its metrics' ports)"},
		{"worker, a recipe", []string{"--role", "reward", "--cluster.seeds", "h:1", "--config", "recipe:countdown-maxent_entropy"}, nil, " and "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := nodeFlags()
			if err := config.ParseFlags(fs, tc.args); err != nil {
				t.Fatal(err)
			}
			file, _ := fs.GetString("config")
			src := config.Sources{File: file, Env: tc.env, Flags: fs}
			cl := config.Default().Cluster
			cl.Role, _ = fs.GetString("role")
			if cl.Role == "" {
				cl.Role = config.RoleAll
			}
			got := workerIgnores(cl, src)
			if tc.want == " and " {
				if !strings.Contains(got, " more (a worker's own") {
					t.Errorf("got %q, want at most %d keys named and the rest counted", got, maxIgnoredKeys)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
