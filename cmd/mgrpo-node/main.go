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
	"unicode/utf8"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/spf13/pflag"
)

// Exit codes.
const (
	exitOK         = 0
	exitFailed     = 1 // the run or subcommand failed
	exitUsage      = 2 // bad flags or configuration
	exitStopped    = 3 // interrupted: stopped after the step in flight, with a checkpoint to resume
	exitNoProgress = 4 // stopped with a checkpoint: train.max_skipped_steps steps in a row skipped, or a guard (train.guard=stop)

	exitInterrupted = 130 // a second interrupt: 128 + SIGINT, as shells report it
)

func main() {
	keepSIGPIPE()
	actors.ReportTelemetryErrors(os.Stderr)
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
	case "device-check":
		return runDeviceCheck, true
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
		fmt.Fprintln(stderr, errorLine(err))
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
	src := config.Sources{File: file, Env: env, Flags: fs, RunConfig: runlog.SavedConfig}
	cfg, err := config.Load(src)
	if err == nil {
		err = checkResumeSteps(cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, errorLine(err))
		return exitUsage
	}
	if line := workerIgnores(cfg.Cluster, src); line != "" {
		fmt.Fprintln(stderr, line)
	}
	if cfg.Model.Device == "cuda" && !gpu.CUDABuilt {
		return handOff("--model.device cuda", args, env, stderr)
	}
	ctx, stop := interruptible(stderr, os.Exit, "mgrpo-node: interrupted: "+interruptNotice(cfg.Cluster), interruptedAgain)
	defer stop()
	ctx, closed := context.WithCancel(ctx)
	defer closed()
	stdout = &watchedOutput{w: stdout, gone: func() {
		fmt.Fprintln(stderr, "mgrpo-node: standard output closed: "+interruptNotice(cfg.Cluster))
		closed()
	}}
	return runRole(ctx, cfg, stdout, stderr)
}

// interruptNotice is what a node says when it is first interrupted: a
// trainer (role all, or any list with the learner) finishes the step in
// flight and checkpoints it; a worker node leaves at once, and the learner
// sends its parts in flight to the other nodes.
func interruptNotice(cl config.Cluster) string {
	if cl.HasRole(config.RoleAll) || cl.HasRole(config.RoleLearner) {
		return "stopping after the step in flight (interrupt again to exit at once, without a checkpoint)"
	}
	return fmt.Sprintf("stopping this %s node now; the learner sends its work in flight to other nodes", cl.Role)
}

// interruptible returns a context that the first SIGINT, SIGTERM or
// SIGHUP (a closed terminal) cancels, printing first unless it is empty:
// a run finishes the step in flight, writes a checkpoint and exits with
// exitStopped; a worker node leaves; eval stops at once. The next one, for
// a run stuck in a long step or allocation, prints again and calls
// exit(exitInterrupted) at once, without a checkpoint. stop releases the
// signals.
func interruptible(stderr io.Writer, exit func(code int), first, again string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			if first != "" {
				fmt.Fprintln(stderr, first)
			}
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(stderr, again)
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

// interruptedAgain is a run's line for a second signal.
const interruptedAgain = "mgrpo-node: interrupted again: exiting without a checkpoint"

// maxErrorLine is the longest error line mgrpo-node prints: an error that
// quotes its input (a config value, a file's content) is cut, so a 45 MB
// value never becomes a 45 MB line.
const maxErrorLine = 1 << 10

// errorLine is err's message on one line, at most maxErrorLine bytes
// (whole runes), marked "…" when cut.
func errorLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) <= maxErrorLine {
		return s
	}
	cut := maxErrorLine
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// nodeFlags is the flag set of a node: --help plus every config flag.
func nodeFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("mgrpo-node", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.BoolP("help", "h", false, "show this help")
	config.AddFlags(fs)
	return fs
}
