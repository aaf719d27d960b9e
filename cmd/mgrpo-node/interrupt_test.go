package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/config"
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

// TestInterruptible sends this process two signals: the first cancels
// the context, prints the first line (a run's; eval prints none) and does
// not exit; the second exits with 130 and the second line. Eval's second
// Ctrl-C was once swallowed while a sampling call ran, and SIGHUP killed it.
func TestInterruptible(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first, again string
		signals      [2]syscall.Signal
		wantStderr   string
	}{
		{"run", "mgrpo-node: interrupted: stopping", interruptedAgain, [2]syscall.Signal{syscall.SIGINT, syscall.SIGTERM},
			"mgrpo-node: interrupted: stopping\n" + interruptedAgain + "\n"},
		{"eval", "", evalInterruptedAgain, [2]syscall.Signal{syscall.SIGHUP, syscall.SIGINT}, evalInterruptedAgain + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr lockedBuffer
			exits := make(chan int, 1)
			ctx, stop := interruptible(&stderr, func(code int) { exits <- code }, tc.first, tc.again)
			defer stop()
			deadline := time.After(time.Minute)
			if err := syscall.Kill(os.Getpid(), tc.signals[0]); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-deadline:
				t.Fatal("the first signal did not cancel the context")
			}
			select {
			case code := <-exits:
				t.Fatalf("the first signal exited with %d", code)
			default:
			}
			if err := syscall.Kill(os.Getpid(), tc.signals[1]); err != nil {
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
			if got := stderr.String(); got != tc.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tc.wantStderr)
			}
		})
	}
}

// TestInterruptibleStop: after stop, no goroutine is left to act on a
// signal and the context is cancelled.
func TestInterruptibleStop(t *testing.T) {
	exits := make(chan int, 1)
	ctx, stop := interruptible(io.Discard, func(code int) { exits <- code }, "mgrpo-node: interrupted: stopping", interruptedAgain)
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
	ctx, stop := interruptible(io.Discard, func(code int) { exits <- code }, "mgrpo-node: interrupted: stopping", interruptedAgain)
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

// TestInterruptNotice: a trainer says it finishes the step in flight; a
// worker node says it stops now (it printed the learner's line about a
// step in flight and a checkpoint, which it has neither of).
func TestInterruptNotice(t *testing.T) {
	for _, tc := range []struct {
		role    string
		learner bool
	}{{"all", true}, {"learner", true}, {"learner,generator", true}, {"generator", false}, {"reward,reference", false}} {
		got := interruptNotice(config.Cluster{Role: tc.role})
		if learner := strings.Contains(got, "step in flight"); learner != tc.learner || (!tc.learner && !strings.Contains(got, tc.role+" node")) {
			t.Errorf("role %s: %q", tc.role, got)
		}
	}
}

// TestLongWorkerInterruptLeaves: a generator node whose learner was
// killed, interrupted while it asks the learner if it is still there,
// prints the worker's line, not the learner's, and exits 0. How long it
// took is logged: it waited for its heartbeat's timeout (1–3 s, the
// probe's finding), and leaves at once now.
func TestLongWorkerInterruptLeaves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a learner and a generator; run without -short")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freeTCPPort(t))
	learner := startProcess(t, ctx, bin, "--role", "learner,reward,reference", "--cluster.port", port, "--cluster.insecure",
		"--model.preset", "tiny", "--train.warm_start_steps", "0", "--train.steps", "100000", "--train.guard", "off",
		"--output.dir", t.TempDir(), "--output.name", "l")
	if !learner.waitLine("learner node:") {
		t.Fatalf("learner: exit %d, stderr %q", learner.exit(t), learner.stderr)
	}
	gen := startProcess(t, ctx, bin, "--role", "generator", "--cluster.insecure", "--cluster.seeds", "127.0.0.1:"+port)
	if !gen.waitLine("node ") || !gen.waitLine("node ") { // looking for the learner; joined its run
		t.Fatalf("generator: exit %d, stderr %q", gen.exit(t), gen.stderr)
	}
	if err := learner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	learner.exit(t)
	start := time.Now()
	if err := gen.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := gen.exit(t)
	t.Logf("the generator exited %v after SIGINT", time.Since(start))
	if code != exitOK || !strings.Contains(gen.stderr.String(), "mgrpo-node: interrupted: stopping this generator node now") ||
		strings.Contains(gen.stderr.String(), "step in flight") {
		t.Errorf("exit %d, stderr %q; want 0 and the worker's line", code, gen.stderr)
	}
}

// freeTCPPort is a port free on 127.0.0.1 a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}
