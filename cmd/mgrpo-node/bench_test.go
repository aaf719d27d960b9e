package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		{"bench", "--preset", "tiny,small"},                                       // a list needs --peer
		{"bench", "--preset", "tiny", "--peer", ".", "--batch", "8"},              // the peer's workload is fixed
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr.String())
		}
	}
}

// TestBenchAgainstPeer runs the peer comparison with a stand-in for
// bench.py that prints fixed figures in the peer's JSON-lines format, and
// fails unless it was given mgrpo's OpenBLAS kernels (or the ones the
// environment names).
func TestBenchAgainstPeer(t *testing.T) {
	dir := t.TempDir()
	kernels := cmp.Or(os.Getenv("OPENBLAS_CORETYPE"), gpu.BLASKernels())
	script := `import os, sys
if os.environ.get("OPENBLAS_CORETYPE", "") != "` + kernels + `":
    sys.exit("OPENBLAS_CORETYPE is %r, want %r" % (os.environ.get("OPENBLAS_CORETYPE"), "` + kernels + `"))
p = sys.argv[sys.argv.index("--presets") + 1]
print('{"preset": "-", "measure": "sgemm_1024", "median": 100.0}')
print('{"preset": "%s", "measure": "learner_step", "median": 0.5, "min": 0.4}' % p)
print('{"preset": "%s", "measure": "sampling", "median": 1000.0, "max": 1200.0}' % p)
print('{"preset": "%s", "measure": "ref_scoring", "median": 2000.0, "max": 2500.0}' % p)
`
	if err := os.WriteFile(filepath.Join(dir, "bench.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "--preset", "tiny", "--peer", dir, "--peer_python", python, "--rounds", "2", "--reps", "1", "--min_time", "1ms"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("bench --peer: exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{"CPU: ", "preset tiny", "learner step", "500.0 ms", "round 2:", "% of its sgemm", "400.0, "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestBenchPeerMissing: a --peer directory without bench.py, or a
// --peer_python that is not there, is one line naming what is missing,
// exit 2, before any benchmark runs (it was Python's error, exit 1).
func TestBenchPeerMissing(t *testing.T) {
	peer, empty, dirPeer := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(peer, "bench.py"), []byte("print()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dirPeer, "bench.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, python, want string
	}{
		{"no bench.py", empty, "/bin/sh", "(looked for " + filepath.Join(empty, "bench.py") + ")"},
		{"bench.py a directory", dirPeer, "/bin/sh", "no PyTorch peer there"},
		{"no python", peer, filepath.Join(empty, "python3"), "--peer_python " + filepath.Join(empty, "python3")},
	} {
		var stdout, stderr bytes.Buffer
		args := []string{"bench", "--preset", "tiny", "--peer", tc.dir, "--peer_python", tc.python, "--rounds", "1"}
		code := run(args, &stdout, &stderr)
		if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and one line with %q", tc.name, code, stderr.String(), exitUsage, tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: stdout %q, want nothing (refused before the benchmark)", tc.name, stdout.String())
		}
	}
}

// TestPeerEnv: the peer is given mgrpo's OpenBLAS kernel set unless the
// environment names one; a build without OpenBLAS gives none.
func TestPeerEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		kernels string
		want    []string
	}{
		{"given", []string{"A=1"}, "SkylakeX", []string{"A=1", "OPENBLAS_CORETYPE=SkylakeX"}},
		{"set by the user", []string{"OPENBLAS_CORETYPE=Haswell"}, "SkylakeX", []string{"OPENBLAS_CORETYPE=Haswell"}},
		{"no OpenBLAS", []string{"A=1"}, "", []string{"A=1"}},
	} {
		if got := peerEnv(tc.env, tc.kernels); !slices.Equal(got, tc.want) {
			t.Errorf("%s: peerEnv = %q, want %q", tc.name, got, tc.want)
		}
	}
}
