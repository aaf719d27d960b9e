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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the signal goroutine's writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInterruptible sends this process two SIGINTs: the first cancels the
// context and does not exit, the second exits with 130 and one line.
func TestInterruptible(t *testing.T) {
	var stderr lockedBuffer
	exits := make(chan int, 1)
	ctx, stop := interruptible(&stderr, func(code int) { exits <- code })
	defer stop()
	deadline := time.After(time.Minute)

	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-deadline:
		t.Fatal("the first SIGINT did not cancel the context")
	}
	select {
	case code := <-exits:
		t.Fatalf("the first SIGINT exited with %d", code)
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exits:
		if code != exitInterrupted {
			t.Errorf("exit code %d, want %d", code, exitInterrupted)
		}
	case <-deadline:
		t.Fatal("the second signal did not exit")
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 2 || lines[1] != "mgrpo-node: interrupted again: exiting without a checkpoint" {
		t.Errorf("stderr = %q, want the interrupt line then the interrupted-again line", stderr.String())
	}
}

// TestInterruptibleStop: after stop, no goroutine is left to act on a
// signal and the context is cancelled.
func TestInterruptibleStop(t *testing.T) {
	exits := make(chan int, 1)
	ctx, stop := interruptible(io.Discard, func(code int) { exits <- code })
	stop()
	stop() // idempotent
	if ctx.Err() == nil {
		t.Error("context not cancelled by stop")
	}
	select {
	case code := <-exits:
		t.Errorf("exit(%d) called after stop", code)
	default:
	}
}

// TestLongSecondInterruptExits130 builds the binary, starts a run whose
// warm-start steps take about a second, interrupts it during a step
// (after the first progress line) and again once it has said it is
// stopping, and expects exit 130 with the interrupted-again line, not a
// wait for the step.
func TestLongSecondInterruptExits130(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it; run without -short")
	}
	bin := filepath.Join(t.TempDir(), "mgrpo-node")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--model.preset", "tiny", "--train.warm_start_steps", "10",
		"--train.warm_start_batch", "3000", "--train.eval_prompts", "1", "--train.steps", "0",
		"--output.dir", t.TempDir(), "--output.name", "sigint")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Each warm-start step prints a line when done; the next starts at once.
	if !waitForLine(stdout, "warm start 1/10") {
		t.Fatalf("no warm-start progress line: %v", cmd.Wait())
	}
	go io.Copy(io.Discard, stdout) //nolint:errcheck // keep the pipe drained
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	errLines := bufio.NewScanner(stderr)
	if !errLines.Scan() || !strings.HasPrefix(errLines.Text(), "mgrpo-node: interrupted: ") {
		t.Fatalf("stderr line %q, want the first interrupt's line", errLines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for errLines.Scan() {
		rest = append(rest, errLines.Text())
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("wait: %v, want exit status %d", err, exitInterrupted)
	}
	if len(rest) != 1 || rest[0] != "mgrpo-node: interrupted again: exiting without a checkpoint" {
		t.Errorf("stderr after the first line = %q, want the interrupted-again line alone", rest)
	}
}

// waitForLine reads r until a line starting with prefix; false at EOF.
func waitForLine(r io.Reader, prefix string) bool {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, prefix) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// TestInterruptibleHangup: SIGHUP (the terminal closed) cancels the
// context like SIGINT and SIGTERM instead of killing the process, so the
// run checkpoints the step in flight.
func TestInterruptibleHangup(t *testing.T) {
	exits := make(chan int, 1)
	ctx, stop := interruptible(io.Discard, func(code int) { exits <- code })
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("SIGHUP did not cancel the context")
	}
	select {
	case code := <-exits:
		t.Fatalf("SIGHUP exited with %d", code)
	default:
	}
}
