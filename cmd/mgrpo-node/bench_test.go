package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
)

func TestBenchPrintsJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "--preset", "tiny", "--batch", "4", "--prompt_len", "4", "--new_tokens", "4", "--min_time", "1ms"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("bench: exit %d, stderr %q", code, stderr.String())
	}
	var r gpu.BenchResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("bench output %q: %v", stdout.String(), err)
	}
	if r.Preset != "tiny" || r.SeqTokens != 32 || !(r.LearnerStepSec > 0) || !(r.SampleTokPerS > 0) || !(r.ScoreTokPerS > 0) ||
		!strings.HasPrefix(r.Device, "cpu: ") {
		t.Errorf("bench result %+v", r)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--preset", "huge"},
		{"bench", "--preset", "tiny", "--batch", "0"},
		{"bench", "--preset", "tiny", "--prompt_len", "60", "--new_tokens", "10"}, // exceeds the context of 64
		{"bench", "--preset", "tiny", "--device", "cuda"},                         // not built with -tags cuda
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr.String())
		}
	}
}
