package actors

import (
	"fmt"
	"io"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// servePage starts serving the run's live page when output.serve is set
// and says where (with a warning when it listens beyond loopback). stop
// closes the server; the static report.html is written as ever.
func servePage(cfg *config.Config, dir *runlog.Dir, out io.Writer) (stop func(), err error) {
	if cfg.Output.Serve == "" {
		return func() {}, nil
	}
	s, err := runlog.Serve(cfg.Output.Serve, dir.Path())
	if err != nil {
		return nil, fmt.Errorf("output.serve %s: %w", cfg.Output.Serve, err)
	}
	fmt.Fprintf(out, "run page %s (live while the run trains)\n", s.URL())
	if !s.Loopback() {
		fmt.Fprintf(out, "warning: output.serve: the run page listens on %s: anyone who can reach it can read the run\n", cfg.Output.Serve)
	}
	return func() { s.Close() }, nil
}
