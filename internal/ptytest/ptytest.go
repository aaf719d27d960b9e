//go:build linux

// Package ptytest opens pseudo-terminals for tests of what a program does
// when its output is a terminal.
package ptytest

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Open opens a new pseudo-terminal and returns its two ends: ptx, which
// reads what is written to the terminal, and tty, the terminal itself (a
// program's standard output). Both close when the test ends. The test is
// skipped where the system has no pseudo-terminals (/dev/ptmx).
func Open(t testing.TB) (ptx, tty *os.File) {
	t.Helper()
	ptx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("ptytest: unlock: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptytest: terminal number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("ptytest: open the terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ptx, tty
}
