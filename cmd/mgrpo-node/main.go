// Command mgrpo-node is the one mgrpo binary: it trains (every actor in
// one process with --role all) or runs one role of a cluster, and carries
// the eval, score, init, bench, traces, certs, report and version
// subcommands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/mgrpo/mgrpo/config"
	"github.com/spf13/pflag"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the run or subcommand failed
	exitUsage  = 2 // bad flags or configuration
	exitGuard  = 3 // a guard stopped the run (train.guard=stop); its checkpoint is written

	exitInterrupted = 130 // a second interrupt: 128 + SIGINT, as shells report it
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: tests call it.
func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(args, os.Environ(), stdout, stderr)
}

// subcommand returns the handler of a first argument.
func subcommand(name string) (func(args []string, stdout, stderr io.Writer) int, bool) {
	switch name {
	case "version":
		return runVersion, true
	case "eval":
		return runEval, true
	case "score":
		return runScore, true
	case "init":
		return runInit, true
	case "bench":
		return runBench, true
	case "traces":
		return runTraces, true
	case "certs":
		return runCerts, true
	case "report":
		return runReport, true
	}
	return nil, false
}

// runEnv dispatches a subcommand, or loads the configuration from args
// and env and runs the node's role.
func runEnv(args, env []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if args[0] == "help" {
			printHelp(stdout, nodeFlags())
			return exitOK
		}
		sub, ok := subcommand(args[0])
		if !ok {
			fmt.Fprintf(stderr, "mgrpo-node: unknown command %q (see mgrpo-node --help)\n", args[0])
			return exitUsage
		}
		return sub(args[1:], stdout, stderr)
	}
	fs := nodeFlags()
	if err := config.ParseFlags(fs, args); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if help, _ := fs.GetBool("help"); help {
		printHelp(stdout, fs)
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mgrpo-node: unexpected argument %q (subcommands come first; see mgrpo-node --help)\n", fs.Arg(0))
		return exitUsage
	}
	file, _ := fs.GetString("config")
	cfg, err := config.Load(config.Sources{File: file, Env: env, Flags: fs})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	ctx, stop := interruptible(stderr, os.Exit)
	defer stop()
	return runRole(ctx, cfg, stdout, stderr)
}

// interruptible returns a context that the first SIGINT or SIGTERM
// cancels: the run finishes the step in flight, writes a checkpoint and
// exits as usual. The next one, for a run stuck in a long step or
// allocation, prints one line and calls exit(exitInterrupted) at once,
// without a checkpoint. stop releases the signals.
func interruptible(stderr io.Writer, exit func(code int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "mgrpo-node: interrupted: stopping after the step in flight (interrupt again to exit at once, without a checkpoint)")
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "mgrpo-node: interrupted again: exiting without a checkpoint")
			exit(exitInterrupted)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel()
		})
	}
}

// nodeFlags is the flag set of a node: --help plus every config flag.
func nodeFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("mgrpo-node", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.BoolP("help", "h", false, "show this help")
	config.AddFlags(fs)
	return fs
}
