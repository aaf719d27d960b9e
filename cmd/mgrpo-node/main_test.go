package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// badConfigs are the three kinds of bad file the issue names, each with
// the key its one-line error must name.
var badConfigs = []struct {
	name, yaml, key string
}{
	{"unknown key", "train:\n  max_stalenes: 2\n", "train.max_stalenes"},
	{"wrong type", "train: {steps: \"abc\"}\n", "train.steps"},
	{"out of range", "train:\n  max_staleness: -1\n", "train.max_staleness"},
}

func TestConfigErrorsExit2(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		key  string
	}{
		{name: "unknown flag", args: []string{"--train.stepz=1"}, key: "train.stepz"},
		{name: "bad flag value", args: []string{"--generation.temperature=hot"}, key: "generation.temperature"},
		{name: "bad role", args: []string{"--role", "boss"}, key: "cluster.role"},
		{name: "bad env", env: []string{"MGRPO_TRAIN__MAX_STALENESS=-2"}, key: "train.max_staleness"},
		{name: "unknown env key", env: []string{"MGRPO_TRAIN__STEPZ=1"}, key: "train.stepz"},
		{name: "impossible combination", args: []string{"--maxent.objective=maxent_listwise", "--maxent.tau=0"}, key: "maxent.tau"},
		{name: "missing file", args: []string{"--config", "/nonexistent.yaml"}, key: "config"},
	}
	for _, bc := range badConfigs {
		cases = append(cases, struct {
			name string
			args []string
			env  []string
			key  string
		}{name: "file " + bc.name, args: []string{"--config", writeConfig(t, bc.yaml)}, key: bc.key})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runEnv(tc.args, tc.env, &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			assertOneLine(t, stderr.String(), tc.key)
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func assertOneLine(t *testing.T, out, key string) {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("stderr = %q, want exactly one line", out)
	}
	if !strings.HasPrefix(out, "config: "+key) {
		t.Errorf("stderr = %q, want it to start with \"config: %s\"", out, key)
	}
}

func TestHelpAndVersion(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"--role", "learner", "MGRPO_TRAIN__MAX_STALENESS", "recipe:", "addition-grpo", "--train.max_staleness"}},
		{[]string{"-h"}, []string{"Roles"}},
		{[]string{"help"}, []string{"Commands"}},
		{[]string{"version"}, []string{"mgrpo-node ", " sha256:", "go1."}},
	}
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		if code := runEnv(tc.args, nil, &stdout, &stderr); code != exitOK {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%q: output lacks %q", tc.args, w)
			}
		}
	}
}

// TestSubcommandHelp: every subcommand answers -h and --help with its
// usage and exit 0 (version and device-check said "unexpected argument",
// exit 2).
func TestSubcommandHelp(t *testing.T) {
	for _, name := range []string{"version", "eval", "score", "init", "bench", "traces", "certs", "report", "device-check"} {
		for _, flag := range []string{"-h", "--help"} {
			var stdout, stderr bytes.Buffer
			if code := runEnv([]string{name, flag}, nil, &stdout, &stderr); code != exitOK {
				t.Errorf("%s %s: exit %d, stderr %q", name, flag, code, stderr.String())
			}
			if out := stdout.String() + stderr.String(); !strings.Contains(out, "mgrpo-node "+name) {
				t.Errorf("%s %s: output %q does not name mgrpo-node %s", name, flag, out, name)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"--role=all", "extra"}, {"version", "x"}} {
		var stdout, stderr bytes.Buffer
		if code := runEnv(args, nil, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
		if strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: stderr %q, want one line", args, stderr.String())
		}
	}
}

// TestLongBuiltBinary builds the real binary and checks the exit code and
// the single stderr line of a bad config, as a user sees them.
func TestLongBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; run without -short")
	}
	bin := filepath.Join(t.TempDir(), "mgrpo-node")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, bc := range badConfigs {
		cmd := exec.Command(bin, "--config", writeConfig(t, bc.yaml))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitUsage {
			t.Errorf("%s: err %v, want exit status %d", bc.name, err, exitUsage)
		}
		assertOneLine(t, stderr.String(), bc.key)
	}
}

// TestErrorLineIsCut: an error line quoting a huge input is cut to
// maxErrorLine bytes, on one line, whole runes.
func TestErrorLineIsCut(t *testing.T) {
	long := errors.New("bad value \"" + strings.Repeat("é\n", 1<<20) + "\"")
	got := errorLine(long)
	if len(got) > maxErrorLine+len("…") || strings.Contains(got, "\n") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("errorLine = %d bytes, %.80q…", len(got), got)
	}
	if short := errorLine(errors.New("disk full")); short != "disk full" {
		t.Errorf("errorLine(short) = %q", short)
	}
}
