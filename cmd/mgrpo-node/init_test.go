package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
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
