package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mgrpo/mgrpo/gpu"
)

// The GPU build. A binary built with -tags cuda links libcuda and cannot
// even load without the NVIDIA driver (and gorgonia.org/cu's package init
// ends the process when cuInit fails), so mgrpo-node is two binaries:
// mgrpo-node, which starts anywhere and runs everything on the CPU, and
// mgrpo-node-cuda (make build-cuda), which mgrpo-node hands a GPU run to
// (docs/ENGINE.md, "Builds").
const (
	// cudaBinaryName is the cuda build's file name, looked for beside
	// this executable, then on PATH.
	cudaBinaryName = "mgrpo-node-cuda"
	// cudaBinaryEnv names the cuda build's path explicitly.
	cudaBinaryEnv = "MGRPO_CUDA_BINARY"
	// probeTimeout bounds the cuda build's device-check (it initialises
	// the driver and lists the GPUs: a second or two).
	probeTimeout = time.Minute
)

// handOff runs a GPU invocation (what: the flag that asks for the GPU;
// args: the whole command line after the program's name) in a binary
// built without CUDA: it finds the cuda build, checks that it can use a
// GPU here (`mgrpo-node-cuda device-check`) and replaces this process by
// it, with the same arguments and environment. It returns only when that
// fails, with one line on stderr and exitUsage.
func handOff(what string, args, env []string, stderr io.Writer) int {
	bin, err := findCUDABinary(env)
	if err == nil {
		err = probeCUDABinary(bin, env)
	}
	if err == nil {
		err = syscall.Exec(bin, append([]string{bin}, args...), env)
		err = fmt.Errorf("start %s: %w", bin, err)
	}
	fmt.Fprintf(stderr, "mgrpo-node: %s: %s\n", what, errorLine(err))
	return exitUsage
}

// findCUDABinary returns the cuda build to hand a GPU run to: the file
// MGRPO_CUDA_BINARY names (in env), else mgrpo-node-cuda beside this
// executable, else on PATH.
func findCUDABinary(env []string) (string, error) {
	if p, ok := lookupEnv(env, cudaBinaryEnv); ok && p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("%s=%s is not an executable file", cudaBinaryEnv, p)
		}
		return p, nil
	}
	self, err := os.Executable()
	if err == nil {
		if p := filepath.Join(filepath.Dir(self), cudaBinaryName); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(cudaBinaryName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("this mgrpo-node has no GPU support and found no %s, the build that has (make build-cuda), beside it (%s), on PATH or in %s",
		cudaBinaryName, filepath.Dir(self), cudaBinaryEnv)
}

// probeCUDABinary runs `bin device-check` and returns nil if it found a
// GPU, else an error with the last line it wrote (the loader's missing
// libcuda.so.1, the driver's refusal, no device).
func probeCUDABinary(bin string, env []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "device-check")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out // gorgonia.org/cu's init reports a failed cuInit on stdout
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer in %v", probeTimeout)
	}
	if last := strings.TrimSpace(lastLine(out.String())); last != "" {
		err = errors.New(last)
	}
	return fmt.Errorf("%s cannot use a GPU on this machine: %w", bin, err)
}

// lookupEnv is os.LookupEnv on an environment list (the last entry wins,
// as in the process's own).
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// isExecutable reports whether path is a regular file someone may run.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runDeviceCheck runs `mgrpo-node device-check`: it prints the GPU that
// --model.device cuda would use in this binary (gpu.ProbeCUDA: no kernels
// compiled, quick) and exits 0, or one line and exitUsage. mgrpo-node
// runs it in mgrpo-node-cuda before handing that binary a GPU run.
func runDeviceCheck(args []string, stdout, stderr io.Writer) int {
	if code, done := noArgs("device-check", "print the GPU that --model.device cuda would use, or why none (exit 2)", args, stdout, stderr); done {
		return code
	}
	info, err := gpu.ProbeCUDA()
	if err != nil {
		hint := ""
		if !gpu.CUDABuilt {
			hint = fmt.Sprintf(" (GPU runs go to %s: try %s device-check)", cudaBinaryName, cudaBinaryName)
		}
		fmt.Fprintf(stderr, "mgrpo-node device-check: %s%s\n", errorLine(err), hint)
		return exitUsage
	}
	fmt.Fprintf(stdout, "cuda: %s\n", info)
	return exitOK
}
