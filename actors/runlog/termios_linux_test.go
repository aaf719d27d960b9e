package runlog

import (
	"bytes"
	"os"
	"testing"

	"github.com/mgrpo/mgrpo/internal/ptytest"
)

// fdWriter is a writer over a file that names its descriptor, as the
// command's watched standard output does.
type fdWriter struct{ f *os.File }

func (w fdWriter) Write(b []byte) (int, error) { return w.f.Write(b) }
func (w fdWriter) Fd() uintptr                 { return w.f.Fd() }

// TestIsTerminalOnATerminal: a terminal is one, directly or through a
// writer that names its descriptor; a buffer is not.
func TestIsTerminalOnATerminal(t *testing.T) {
	_, tty := ptytest.Open(t)
	if !IsTerminal(tty) {
		t.Error("a pseudo-terminal is not a terminal")
	}
	if !IsTerminal(fdWriter{tty}) {
		t.Error("a writer over a pseudo-terminal that names its descriptor is not a terminal")
	}
	if IsTerminal(struct{ *bytes.Buffer }{new(bytes.Buffer)}) {
		t.Error("a buffer is a terminal")
	}
}
