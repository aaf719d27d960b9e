package actors

import (
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/actors/runlog"
)

// servePage starts serving the run's live page on addr (output.serve;
// "": none) and says where (with a warning when it listens beyond
// loopback). stop closes the server; the static report.html is written as
// ever.
func servePage(addr string, dir *runlog.Dir, out io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	s, err := runlog.Serve(addr, dir.Path())
	if err != nil {
		return nil, fmt.Errorf("output.serve %s: %w", addr, err)
	}
	fmt.Fprintf(out, "run page %s (live while the run trains)\n", s.URL())
	if !s.Loopback() {
		fmt.Fprintf(out, "warning: output.serve: the run page listens on %s: anyone who can reach it can read the run\n", addr)
	}
	return func() { s.Close() }, nil
}
