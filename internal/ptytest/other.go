//go:build !linux

package ptytest

import (
	"os"
	"runtime"
	"testing"
)

// Open skips the test: pseudo-terminals are opened on Linux only.
func Open(t testing.TB) (ptx, tty *os.File) {
	t.Skipf("ptytest: pseudo-terminals are opened on Linux only, not %s", runtime.GOOS)
	return nil, nil
}
