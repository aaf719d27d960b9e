package actors

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// servePage starts serving the run's live page on addr (output.serve;
// "": none) and says where (with a warning when it listens beyond
// loopback). stop closes the server; the static report.html is written as
// ever. An address it cannot listen on (taken, or a host that is not
// this machine's) is a configuration error: one line naming
// output.serve, exit 2, before the first step.
func servePage(addr string, dir *runlog.Dir, out io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	s, err := runlog.Serve(addr, dir.Path())
	if err != nil {
		return nil, &config.Error{Key: "output.serve", Value: addr, Reason: "cannot listen there: " + listenReason(err), Err: config.ErrRange}
	}
	fmt.Fprintf(out, "run page %s (live while the run trains)\n", s.URL())
	if !s.Loopback() {
		fmt.Fprintf(out, "warning: output.serve: the run page listens on %s: anyone who can reach it can read the run\n", addr)
	}
	return func() { s.Close() }, nil
}

// listenReason is why a listen failed, without the address the error
// line names already ("bind: address already in use").
func listenReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}
