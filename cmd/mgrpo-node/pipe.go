package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// keepSIGPIPE makes a write to a closed standard output or error fail with
// EPIPE instead of killing the process: by default a Go program dies of
// SIGPIPE there without a word, a run without its checkpoint. The signal is
// taken on a channel no one reads (a signal never blocks on a full one);
// ignoring it instead would leave it ignored in the processes mgrpo-node
// starts.
func keepSIGPIPE() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// watchedOutput is standard output that calls gone, once, when a write
// finds that no one reads it any more (`mgrpo-node | head` after head
// exits): a run then stops after the step in flight with a checkpoint, as
// when its terminal closes.
type watchedOutput struct {
	w    io.Writer
	gone func()
	once sync.Once
}

// Fd is the descriptor of the file under the output, so that a run's
// progress line knows a terminal when it writes to one (runlog.IsTerminal);
// an invalid one when the output is no file.
func (o *watchedOutput) Fd() uintptr {
	if f, ok := o.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// Write writes b to the output, calling gone when it is closed.
func (o *watchedOutput) Write(b []byte) (int, error) {
	n, err := o.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		o.once.Do(o.gone)
	}
	return n, err
}
