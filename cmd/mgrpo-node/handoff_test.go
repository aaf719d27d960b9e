package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
)

// mainEnv makes the test binary run main instead of the tests (asMain):
// the hand-off replaces the process, which only a process of its own can
// show.
const mainEnv = "MGRPO_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// asMain runs this test binary as mgrpo-node with args and env (plus
// mainEnv), and returns its exit code and stderr.
func asMain(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{mainEnv + "=1", "PATH=" + os.Getenv("PATH")}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// fakeCUDABinary writes a stand-in for mgrpo-node-cuda into dir: its
// device-check prints probe and exits probeExit; any other invocation
// writes its arguments (one a line) to dir/args and the environment it
// was started with (/proc's copy: exactly what exec passed) to dir/env,
// then exits 7.
func fakeCUDABinary(t *testing.T, dir, probe string, probeExit int) string {
	t.Helper()
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = device-check ]; then echo '" + probe + "'; exit " + strconv.Itoa(probeExit) + "; fi\n" +
		"printf '%s\\n' \"$@\" >\"" + dir + "/args\"\n" +
		"cat /proc/$$/environ >\"" + dir + "/env\"\n" +
		"exit 7\n"
	bin := filepath.Join(dir, cudaBinaryName)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestHandOff: a binary without CUDA hands a GPU run (--model.device cuda
// as a flag or in the environment, bench --device cuda) to the cuda build
// with the same arguments and environment once its device-check found a
// GPU; without a cuda build, or when its check fails, it stops with one
// line and exit 2.
func TestHandOff(t *testing.T) {
	if gpu.CUDABuilt {
		t.Skip("this build opens cuda itself")
	}
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	dir := t.TempDir()
	run := []string{"--model.device", "cuda", "--train.steps", "1", "--output.dir", dir}
	t.Run("no cuda binary", func(t *testing.T) {
		code, stderr := asMain(t, []string{"PATH=" + t.TempDir()}, run...)
		wantLine(t, code, stderr, "no "+cudaBinaryName)
	})
	t.Run("not executable", func(t *testing.T) {
		code, stderr := asMain(t, []string{cudaBinaryEnv + "=" + dir}, run...)
		wantLine(t, code, stderr, "not an executable file")
	})
	t.Run("probe fails", func(t *testing.T) {
		bin := fakeCUDABinary(t, t.TempDir(), "mgrpo-node-cuda: error while loading shared libraries: libcuda.so.1: cannot open shared object file", 1)
		code, stderr := asMain(t, []string{cudaBinaryEnv + "=" + bin}, run...)
		wantLine(t, code, stderr, "cannot use a GPU on this machine: mgrpo-node-cuda: error while loading shared libraries: libcuda.so.1")
	})
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, run},
		{"environment", []string{"MGRPO_MODEL__DEVICE=cuda"}, []string{"--train.steps", "1"}},
		{"bench", nil, []string{"bench", "--preset", "tiny", "--device", "cuda", "--dtype", "bf16"}},
	} {
		t.Run("exec "+tc.name, func(t *testing.T) {
			out := t.TempDir()
			bin := fakeCUDABinary(t, out, "cuda: GPU 0: fake", 0)
			env := append([]string{cudaBinaryEnv + "=" + bin, "MGRPO_SOMETHING=a b=c"}, tc.env...)
			if code, stderr := asMain(t, env, tc.args...); code != 7 {
				t.Fatalf("exit %d, stderr %q; want the cuda binary's 7", code, stderr)
			}
			args, _ := os.ReadFile(filepath.Join(out, "args"))
			if got := strings.Split(strings.TrimSuffix(string(args), "\n"), "\n"); !slices.Equal(got, tc.args) {
				t.Errorf("the cuda binary got arguments %q, want %q", got, tc.args)
			}
			got, _ := os.ReadFile(filepath.Join(out, "env"))
			want := append([]string{mainEnv + "=1", "PATH=" + os.Getenv("PATH")}, env...)
			if g := strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00"); !slices.Equal(g, want) {
				t.Errorf("the cuda binary got environment %q, want %q", g, want)
			}
		})
	}
}

// wantLine checks a refused hand-off: exit 2 and one stderr line that
// contains want.
func wantLine(t *testing.T, code int, stderr, want string) {
	t.Helper()
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %d and one line containing %q", code, stderr, exitUsage, want)
	}
}

// TestFindCUDABinary: MGRPO_CUDA_BINARY first, then mgrpo-node-cuda on
// PATH (beside the test binary there is none).
func TestFindCUDABinary(t *testing.T) {
	dir := t.TempDir()
	bin := fakeCUDABinary(t, dir, "", 0)
	if got, err := findCUDABinary([]string{cudaBinaryEnv + "=/nowhere", cudaBinaryEnv + "=" + bin}); got != bin || err != nil {
		t.Errorf("from the environment: %q, %v; want %q", got, err, bin)
	}
	t.Setenv("PATH", dir)
	if got, err := findCUDABinary(nil); got != bin || err != nil {
		t.Errorf("from PATH: %q, %v; want %q", got, err, bin)
	}
	t.Setenv("PATH", "")
	if _, err := findCUDABinary(nil); err == nil || !strings.Contains(err.Error(), "make build-cuda") {
		t.Errorf("none: error %v, want one saying how to build it", err)
	}
}

// TestDeviceCheckWithoutCUDA: device-check in a build without CUDA says so
// in one line and exits 2, naming the binary that has it.
func TestDeviceCheckWithoutCUDA(t *testing.T) {
	if gpu.CUDABuilt {
		t.Skip("this build opens cuda itself")
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"device-check"}, &stdout, &stderr)
	wantLine(t, code, stderr.String(), cudaBinaryName+" device-check")
	if code := run([]string{"device-check", "x"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("device-check x: exit %d", code)
	}
}
