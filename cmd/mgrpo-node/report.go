package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/mgrpo/mgrpo/actors/runlog"
)

// runReport runs `mgrpo-node report [--out FILE] [--serve ADDR] RUN...`:
// one page of the run directories, overlaid (same panels, one colour per
// run). One run's page goes to RUN/report.html and several runs' to
// compare.html, unless --out names the file. --serve serves the live page
// of the runs instead, until interrupted: for a run started without
// output.serve, or to watch several at once.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node report", pflag.ContinueOnError)
	out := fs.String("out", "", "page to write, FILE.html (default: RUN/report.html for one run, compare.html for several)")
	serve := fs.String("serve", "", "serve the live page on HOST:PORT or :PORT (127.0.0.1) instead of writing it")
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintf(stdout, "Usage: mgrpo-node report [flags] RUN_DIR...\n%s", fs.FlagUsages())
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "mgrpo-node report: %v\n", err)
		return exitUsage
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "mgrpo-node report: give one or more run directories (runs/NAME)")
		return exitUsage
	}
	if *out != "" && *serve == "" {
		if err := checkHTMLOut("--out", *out); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node report: %v\n", err)
			return exitUsage
		}
	}
	dirs := fs.Args()
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, runlog.MetricsFile)); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node report: %s is not a run directory (no %s)\n", d, runlog.MetricsFile)
			return exitUsage
		}
	}
	if *serve != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serveReport(ctx, *serve, dirs, stdout, stderr)
	}
	path := *out
	switch {
	case path != "":
	case len(dirs) == 1:
		path = filepath.Join(dirs[0], runlog.ReportFile)
	default:
		path = "compare.html"
	}
	if err := runlog.WritePage(path, dirs...); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node report: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s (%d run%s)\n", path, len(dirs), map[bool]string{true: "s"}[len(dirs) > 1])
	return exitOK
}

// serveReport serves the live page of dirs on addr until ctx ends.
func serveReport(ctx context.Context, addr string, dirs []string, stdout, stderr io.Writer) int {
	s, err := runlog.Serve(addr, dirs...)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node report: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "serving %s (Ctrl-C stops)\n", s.URL())
	if !s.Loopback() {
		fmt.Fprintf(stdout, "warning: the page listens on %s: anyone who can reach it can read the runs\n", addr)
	}
	<-ctx.Done()
	s.Close()
	return exitOK
}

// checkHTMLOut refuses a page path (flag names it) that does not end in
// .html, names a directory, or lies in a directory that does not exist.
// The page itself is written atomically (atomicfile).
func checkHTMLOut(flag, path string) error {
	if !strings.EqualFold(filepath.Ext(path), ".html") {
		return fmt.Errorf("%s %s: the page is HTML: give a file name ending in .html", flag, path)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s is a directory: give a file name ending in .html", flag, path)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("%s %s: directory %s does not exist", flag, path, filepath.Dir(path))
	}
	return nil
}
