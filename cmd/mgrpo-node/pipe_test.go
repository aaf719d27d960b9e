package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/internal/ptytest"
)

// TestWatchedOutput: standard output whose reader has gone calls gone
// once, however many writes find it gone, and never while it is read.
func TestWatchedOutput(t *testing.T) {
	for _, tc := range []struct {
		name       string
		readerGone bool
		calls      int
	}{
		{"read", false, 0},
		{"reader gone", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			defer r.Close()
			if tc.readerGone {
				r.Close()
			}
			calls := 0
			o := &watchedOutput{w: w, gone: func() { calls++ }}
			for range 3 {
				_, err := o.Write([]byte("step\n"))
				if gone := errors.Is(err, syscall.EPIPE); gone != tc.readerGone {
					t.Fatalf("write: %v", err)
				}
			}
			if calls != tc.calls {
				t.Errorf("gone called %d times, want %d", calls, tc.calls)
			}
		})
	}
}

// TestLongClosedOutputStops: a run whose standard output is closed
// (`mgrpo-node | head`) stops after the step in flight with a checkpoint,
// says so on stderr and exits 3, as on SIGHUP. It died of SIGPIPE at its
// next progress line, without a word, and lost every step since its last
// checkpoint.
func TestLongClosedOutputStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it; run without -short")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	run := filepath.Join(out, "r")
	n := startProcess(t, ctx, bin, asyncArgs(out, "r", "1000")...)
	if !n.waitLine("step 10/1000") {
		t.Fatalf("no step 10 line: exit %d, stderr %q", n.exit(t), n.stderr)
	}
	n.stdout.Close() // what head does when it has its lines
	err := n.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitStopped {
		t.Fatalf("exit: %v, want code %d; stderr %q", err, exitStopped, n.stderr)
	}
	_, step, err := runlog.LatestComplete(filepath.Join(run, runlog.CheckpointsDir))
	if err != nil || step < 10 {
		t.Fatalf("latest checkpoint step %d (%v), want one at or after step 10", step, err)
	}
	want := []string{
		"mgrpo-node: standard output closed: stopping after the step in flight (interrupt again to exit at once, without a checkpoint)",
		"mgrpo-node: stopped at step " + strconv.Itoa(step) + "; resume with: mgrpo-node --resume " + run,
	}
	var got []string
	for s := bufio.NewScanner(strings.NewReader(n.stderr.String())); s.Scan(); {
		got = append(got, s.Text())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWatchedOutputNamesItsFile: the watched output names the descriptor
// of the file under it, so that a run knows a terminal; over anything
// else it names none.
func TestWatchedOutputNamesItsFile(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := (&watchedOutput{w: f}).Fd(); got != f.Fd() {
		t.Errorf("over a file: descriptor %d, want the file's %d", got, f.Fd())
	}
	if got := (&watchedOutput{w: new(strings.Builder)}).Fd(); got != ^uintptr(0) {
		t.Errorf("over a builder: descriptor %d, want none (%d)", got, ^uintptr(0))
	}
}

// TestTerminalProgress: a run whose standard output is a terminal rewrites
// its progress line in place at every step. Behind the watch for a closed
// output it took the terminal for a log and printed a line every 10 steps.
func TestTerminalProgress(t *testing.T) {
	ptx, tty := ptytest.Open(t)
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(&screen, ptx) // until the terminal's last holder closes it
	}()
	args := []string{"--model.preset", "tiny", "--train.warm_start_steps", "0", "--train.steps", "12",
		"--train.prompts_per_step", "4", "--generation.num_generations", "4", "--train.eval_every", "0",
		"--train.eval_prompts", "4", "--train.checkpoint_every", "0", "--output.sample_every", "0",
		"--output.dir", t.TempDir(), "--output.name", "r"}
	var stderr bytes.Buffer
	if code := run(args, tty, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	tty.Close()
	<-read
	for step := 1; step <= 12; step++ {
		if line := "\rstep " + strconv.Itoa(step) + "/12 | "; !strings.Contains(screen.String(), line) {
			t.Errorf("no %q on the terminal:\n%q", line, screen.String())
		}
	}
}
