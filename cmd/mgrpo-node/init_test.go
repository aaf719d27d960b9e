package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/safetensors"
)

func TestInitWritesCheckpoint(t *testing.T) {
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for _, dir := range dirs {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"init", "--preset", "tiny", "--seed", "3", "--out", dir}, &stdout, &stderr); code != exitOK {
			t.Fatalf("init: exit %d, stderr %q", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "26912 parameters") {
			t.Errorf("init stdout %q, want the tiny preset's 26912 parameters", stdout.String())
		}
	}
	m, tok, err := gpu.LoadCheckpoint(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := gpu.Preset("tiny"); m.Config() != c || tok.VocabSize() != 98 {
		t.Errorf("loaded config %+v, vocab %d", m.Config(), tok.VocabSize())
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two inits with the same seed", f)
		}
	}
}

func TestInitUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x")
	for _, args := range [][]string{
		{"init", "--preset", "huge", "--out", out},
		{"init", "--preset", "tiny"},
		{"init", "--seed", "minus-one", "--out", out},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
		if !strings.HasSuffix(stderr.String(), "\n") || stderr.Len() == 0 {
			t.Errorf("%q: stderr %q, want an explanation", args, stderr.String())
		}
	}
}

// TestInitFailedWriteKeepsTheOldModel: init writes beside --out and
// renames the model in when it is complete, so a write that fails halfway
// (model.safetensors past a file size limit of 40 blocks, as on a full
// disk) leaves a new --out absent and an old one as it was: init --force
// removed the old model's files first, then failed, leaving a config.json
// of the new model beside nothing. Once it succeeds, --force keeps the
// files that do not describe a model.
func TestInitFailedWriteKeepsTheOldModel(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "m")
	code, stderr := asMainLimited(t, 40, "init", "--preset", "tiny", "--out", dir)
	if code != exitFailed || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "file too large") {
		t.Errorf("init on a full disk: exit %d, stderr %q; want %d and one line naming the error", code, stderr, exitFailed)
	}
	onlyEntry(t, parent)

	var stdout, errOut bytes.Buffer
	if code := run([]string{"init", "--preset", "tiny", "--out", dir}, &stdout, &errOut); code != exitOK {
		t.Fatalf("init: exit %d, stderr %q", code, errOut.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	code, stderr = asMainLimited(t, 40, "init", "--preset", "tiny", "--seed", "9", "--force", "--out", dir)
	if code != exitFailed || strings.Count(stderr, "\n") != 1 {
		t.Errorf("init --force on a full disk: exit %d, stderr %q; want %d and one line", code, stderr, exitFailed)
	}
	if after := snapshot(t, dir); !maps.Equal(after, before) {
		t.Errorf("a failed init --force changed %s: %q", dir, slices.Sorted(maps.Keys(after)))
	}
	onlyEntry(t, parent, "m")

	if code := run([]string{"init", "--preset", "tiny", "--seed", "9", "--force", "--out", dir}, &stdout, &errOut); code != exitOK {
		t.Fatalf("init --force: exit %d, stderr %q", code, errOut.String())
	}
	after := snapshot(t, dir)
	if after["NOTES.md"] != "mine" || after["model.safetensors"] == before["model.safetensors"] {
		t.Errorf("init --force: NOTES.md %q (want kept), weights changed %v (want true)", after["NOTES.md"], after["model.safetensors"] != before["model.safetensors"])
	}
	onlyEntry(t, parent, "m")
}

// TestInitOutTheWorkingDirectory: `init --out .` over the working
// directory is one line, exit 2, and changes nothing: replaced, it would
// leave the shell in the removed old directory. A new directory under it
// is fine.
func TestInitOutTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := run([]string{"init", "--preset", "tiny", "--out", ".", "--force"}, &stdout, &stderr)
	if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "working directory") {
		t.Errorf("init --out . --force: exit %d, stderr %q; want %d and one line naming the working directory", code, stderr.String(), exitUsage)
	}
	onlyEntry(t, dir, "NOTES.md")
	if code := run([]string{"init", "--preset", "tiny", "--out", "m"}, &stdout, &stderr); code != exitOK {
		t.Errorf("init --out m in the working directory: exit %d, stderr %q", code, stderr.String())
	}
}

// TestInitOutAFile: --out naming a file is one line, exit 2.
func TestInitOutAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"init", "--preset", "tiny", "--out", file, "--force"}, &stdout, &stderr)
	if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), file+" is a file") {
		t.Errorf("init --out FILE: exit %d, stderr %q", code, stderr.String())
	}
}

// TestShardedCheckpoint: a checkpoint in Hugging Face's sharded layout
// (model.safetensors.index.json and its shards, no model.safetensors)
// trains from --model.checkpoint and evaluates with eval --checkpoint as
// the one file it was cut from does; a run whose index names a shard that
// is not there stops with one line naming it (exit 2) and writes nothing.
func TestShardedCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"init", "--preset", "tiny", "--out", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("init: exit %d, stderr %q", code, stderr.String())
	}
	shard(t, dir, 2)
	out := t.TempDir()
	if code := runEnv(quickRun(out, "r", "1", "--model.checkpoint", dir), nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("train from a sharded checkpoint: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"eval", "--checkpoint", dir, "--n", "4"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("eval of a sharded checkpoint: exit %d, stderr %q", code, stderr.String())
	}
	if err := os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors")); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	code := runEnv(quickRun(out, "s", "1", "--model.checkpoint", dir), nil, &stdout, &stderr)
	if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "model-00002-of-00002.safetensors") {
		t.Errorf("a missing shard: exit %d, stderr %q; want %d and one line naming the shard", code, stderr.String(), exitUsage)
	}
	if _, err := os.Stat(filepath.Join(out, "s")); err == nil {
		t.Errorf("a refused run left %s", filepath.Join(out, "s"))
	}
}

// shard rewrites dir's model.safetensors as n shards and an index, as
// Hugging Face saves a large model.
func shard(t *testing.T, dir string, n int) {
	t.Helper()
	path := filepath.Join(dir, gpu.WeightsFileName)
	f, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	shards := make([][]safetensors.Tensor, n)
	weightMap := map[string]string{}
	for i, name := range f.Tensors() {
		v, shape, _ := f.Float32(name)
		shards[i%n] = append(shards[i%n], safetensors.Tensor{Name: name, Shape: shape, F32: v})
		weightMap[name] = fmt.Sprintf("model-%05d-of-%05d.safetensors", i%n+1, n)
	}
	for i, ts := range shards {
		if err := safetensors.Write(filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)), ts, f.Metadata()); err != nil {
			t.Fatal(err)
		}
	}
	index, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, gpu.IndexFileName), index, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
