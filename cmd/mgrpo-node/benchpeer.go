package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mgrpo/mgrpo/gpu"
)

// The peer comparison (`mgrpo-node bench --peer DIR`): the PyTorch peer's
// bench.py and gpu.Bench run back to back in interleaved rounds (peer,
// mgrpo, peer, mgrpo, ...) on the same machine, and the report gives the
// median of each figure and the ratios DESIGN §6 sets targets for.

// figures are one round's results of one side for one preset: medians
// of its runs, and its best runs (…Best).
type figures struct {
	learnerSec, sampleTokS, scoreTokS, sgemmGFLOPS float64
	learnerBest, sampleBest, scoreBest             float64
	load                                           float64 // 1-minute load average when the run started
}

// peerRun runs the peer's bench.py for one preset and returns its medians.
type peerRun func(preset string) (figures, error)

// peerScript is the file of the PyTorch peer in --peer's directory.
const peerScript = "bench.py"

// checkPeer refuses a --peer directory without bench.py, and a
// --peer_python that is not there, before the benchmark starts.
func checkPeer(dir, python string) error {
	script := filepath.Join(dir, peerScript)
	if st, err := os.Stat(script); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("--peer %s: no PyTorch peer there (looked for %s)", dir, script)
	}
	if _, err := exec.LookPath(python); err != nil {
		return fmt.Errorf("--peer_python %s: %v", python, errors.Unwrap(err))
	}
	return nil
}

// pythonPeer returns a peerRun executing python on dir/bench.py.
func pythonPeer(python, dir string, threads, reps int) peerRun {
	return func(preset string) (figures, error) {
		script := filepath.Join(dir, peerScript)
		cmd := exec.Command(python, script, "--presets", preset, "--threads", strconv.Itoa(threads), "--reps", strconv.Itoa(reps))
		cmd.Env = peerEnv(os.Environ(), gpu.BLASKernels())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		f := figures{load: loadAverage()}
		if err := cmd.Run(); err != nil {
			return f, fmt.Errorf("peer %s %s: %w: %s", python, script, err, lastLine(stderr.String()))
		}
		return parsePeer(&stdout, preset, f)
	}
}

// peerEnv is the peer's environment: env, with OPENBLAS_CORETYPE set to
// kernels (the OpenBLAS kernel set mgrpo runs) unless env sets it or
// kernels is "". Debian's torch goes through the same OpenBLAS, whose
// DYNAMIC_ARCH build falls back to its plain-SSE3 kernels on CPUs it does
// not know (newer Xeons: a quarter of the speed); mgrpo re-selects its
// own, so without this the peer would be measured on kernels mgrpo does
// not use.
func peerEnv(env []string, kernels string) []string {
	if kernels == "" || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") }) {
		return env
	}
	return append(slices.Clip(env), "OPENBLAS_CORETYPE="+kernels)
}

// parsePeer reads bench.py's JSON lines ({"preset", "measure", "median"}).
func parsePeer(r io.Reader, preset string, f figures) (figures, error) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rec struct {
			Preset, Measure string
			Median          float64
			Min, Max        float64
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return f, fmt.Errorf("peer output line %q: %w", sc.Text(), err)
		}
		if rec.Preset != preset && rec.Measure != "sgemm_1024" {
			continue
		}
		seen[rec.Measure] = true
		switch rec.Measure {
		case "learner_step":
			f.learnerSec, f.learnerBest = rec.Median, rec.Min
		case "sampling":
			f.sampleTokS, f.sampleBest = rec.Median, rec.Max
		case "ref_scoring":
			f.scoreTokS, f.scoreBest = rec.Median, rec.Max
		case "sgemm_1024":
			f.sgemmGFLOPS = rec.Median
		}
	}
	for _, m := range []string{"learner_step", "sampling", "ref_scoring"} {
		if !seen[m] {
			return f, fmt.Errorf("peer output has no %s figure for preset %s", m, preset)
		}
	}
	return f, sc.Err()
}

// oursRun runs gpu.Bench for one preset.
func oursRun(o gpu.BenchOptions) func(preset string) (figures, gpu.BenchResult, error) {
	return func(preset string) (figures, gpu.BenchResult, error) {
		f := figures{load: loadAverage()}
		r, err := gpu.Bench(preset, o)
		f.learnerSec, f.sampleTokS, f.scoreTokS, f.sgemmGFLOPS = r.LearnerStepSec, r.SampleTokPerS, r.ScoreTokPerS, r.SgemmGFLOPS
		f.learnerBest, f.sampleBest, f.scoreBest = r.LearnerStepMinSec, r.SampleTokPerSMax, r.ScoreTokPerSMax
		return f, r, err
	}
}

// comparePeer runs rounds interleaved rounds for each preset and writes the
// report to w.
func comparePeer(w io.Writer, presets []string, rounds int, peer peerRun, ours func(string) (figures, gpu.BenchResult, error)) error {
	for _, p := range presets {
		var theirs, mine []figures
		var last gpu.BenchResult
		for i := 0; i < rounds; i++ {
			f, err := peer(p)
			if err != nil {
				return err
			}
			theirs = append(theirs, f)
			g, r, err := ours(p)
			if err != nil {
				return err
			}
			mine, last = append(mine, g), r
		}
		writeComparison(w, last, theirs, mine)
	}
	return nil
}

// writeComparison prints one preset's medians, ratios and the rounds.
func writeComparison(w io.Writer, r gpu.BenchResult, theirs, mine []figures) {
	med := func(fs []figures, get func(figures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	best := func(fs []figures, get func(figures) float64, lower bool) float64 {
		b := get(fs[0])
		for _, f := range fs[1:] {
			if v := get(f); v < b == lower {
				b = v
			}
		}
		return b
	}
	learn := func(f figures) float64 { return f.learnerSec }
	sgemm := func(f figures) float64 { return f.sgemmGFLOPS }
	ml := med(mine, learn)
	gflops := r.LearnerGFLOPS * r.LearnerStepSec / ml // the FLOPs of a step over the median time
	fmt.Fprintf(w, "preset %s: %d params, batch %d × (%d prompt + %d new) tokens, %d rounds (peer, mgrpo interleaved)\n",
		r.Preset, r.Params, r.Batch, r.PromptLen, r.NewTokens, len(mine))
	fmt.Fprintf(w, "  %-13s %12s %12s %8s   %-30s %s\n", "medians", "peer", "mgrpo", "ratio", "target", "best runs: peer, mgrpo, ratio")
	rows := []struct {
		name, unit, target string
		get, getBest       func(figures) float64
		time               bool
	}{
		{"learner step", "ms", "≤ 0.5× the peer's time", learn, func(f figures) float64 { return f.learnerBest }, true},
		{"sampling", "t/s", "≥ 2× the peer's new tok/s", func(f figures) float64 { return f.sampleTokS }, func(f figures) float64 { return f.sampleBest }, false},
		{"scoring", "t/s", "≥ 1.5× the peer's tok/s", func(f figures) float64 { return f.scoreTokS }, func(f figures) float64 { return f.scoreBest }, false},
	}
	for _, row := range rows {
		p, m, pb, mb := med(theirs, row.get), med(mine, row.get), best(theirs, row.getBest, row.time), best(mine, row.getBest, row.time)
		scale, prec := 1.0, 0
		if row.time {
			scale, prec = 1e3, 1
		}
		fmt.Fprintf(w, "  %-13s %8.*f %-3s %8.*f %-3s %7.2f×   %-30s %.*f, %.*f, %.2f×\n", row.name, prec, scale*p, row.unit,
			prec, scale*m, row.unit, m/p, row.target, prec, scale*pb, prec, scale*mb, mb/pb)
	}
	fmt.Fprintf(w, "  sgemm 1024³: peer %.0f GFLOP/s, mgrpo %.0f GFLOP/s; mgrpo learner step %.0f GFLOP/s = %.0f%% of its sgemm\n",
		med(theirs, sgemm), med(mine, sgemm), gflops, 100*gflops/med(mine, sgemm))
	for i := range mine {
		t, m := theirs[i], mine[i]
		fmt.Fprintf(w, "  round %d: load %.2f/%.2f  learner %.1f/%.1f ms  sampling %.0f/%.0f t/s  scoring %.0f/%.0f t/s  (peer/mgrpo medians)\n",
			i+1, t.load, m.load, 1e3*t.learnerSec, 1e3*m.learnerSec, t.sampleTokS, m.sampleTokS, t.scoreTokS, m.scoreTokS)
	}
}

// loadAverage is the 1-minute load average (0 where /proc is missing).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return v
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// peerKernels says which OpenBLAS kernels the peer is given: set, from
// the environment, or kernels, mgrpo's (peerEnv); "" when neither.
func peerKernels(set, kernels string) string {
	switch {
	case set != "":
		return "; OPENBLAS_CORETYPE=" + set + " from the environment"
	case kernels != "":
		return "; OpenBLAS " + kernels + " kernels, as mgrpo's"
	}
	return ""
}
