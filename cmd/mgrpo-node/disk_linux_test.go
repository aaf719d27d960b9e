package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"golang.org/x/sys/unix"
)

// TestLongDiskFullAndReadOnly trains onto a 1.5 MB tmpfs until it is
// full: the run stops with one line naming the error (exit 1) and its
// newest checkpoint verifies; with the disk grown, a resume continues; on
// the disk mounted read-only, a resume stops with one line and changes
// nothing. It needs to mount a tmpfs (root, or CAP_SYS_ADMIN), and skips
// otherwise: running as root, file permissions cannot make a directory
// read-only, a mount can.
func TestLongDiskFullAndReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and trains; run without -short")
	}
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=1536k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(disk, unix.MNT_DETACH) })
	run := filepath.Join(disk, "r")
	var stdout, stderr bytes.Buffer
	code := runEnv(quickRun(disk, "r", "100000", "--train.checkpoint_every", "5", "--output.keep_checkpoints", "0"), nil, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "no space left on device") || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("full disk: exit %d, stderr %q; want %d and one line naming ENOSPC", code, stderr.String(), exitFailed)
	}
	t.Logf("full disk: %s", stderr.String())
	ckpt, step, err := runlog.LatestComplete(filepath.Join(run, runlog.CheckpointsDir))
	if err != nil || runlog.Verify(ckpt) != nil {
		t.Fatalf("after the full disk: latest checkpoint %s (%v), verify %v", ckpt, err, runlog.Verify(ckpt))
	}

	if err := unix.Mount("tmpfs", disk, "tmpfs", unix.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	target := step + 3
	if code := runEnv([]string{"--resume", run, "--train.steps", strconv.Itoa(target)}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("resume on the grown disk: exit %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "done: "+strconv.Itoa(target)+" steps") {
		t.Errorf("resume on the grown disk: %q", stdout.String())
	}

	before, err := os.ReadFile(filepath.Join(run, runlog.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", disk, "tmpfs", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code = runEnv([]string{"--resume", run, "--train.steps", strconv.Itoa(target + 3)}, nil, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "read-only file system") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("read-only disk: exit %d, stderr %q; want %d and one line naming EROFS", code, stderr.String(), exitFailed)
	}
	if after, _ := os.ReadFile(filepath.Join(run, runlog.MetricsFile)); !bytes.Equal(after, before) {
		t.Errorf("a resume on a read-only disk changed metrics.jsonl")
	}
}
