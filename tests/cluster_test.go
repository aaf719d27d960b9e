package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The cluster tests run mgrpo-node as separate OS processes on 127.0.0.1
// (proto.actor's remote and cluster code races inside itself, go-deps
// §11e, so they stay out of -race). Each is a TestLong… test: make test
// runs them without the race detector.

var (
	buildOnce sync.Once
	binaries  = map[string]string{}
	buildErr  error
)

// binary returns the path of mgrpo-node built from this tree, once per
// test process; suffix, if not empty, is stamped as the build's version
// (another build of the same source, for the version check).
func binary(t *testing.T, suffix string) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mgrpo-bin-")
		if err != nil {
			buildErr = err
			return
		}
		for _, s := range []string{"", "other"} {
			out := filepath.Join(dir, "mgrpo-node"+s)
			args := []string{"build", "-o", out}
			if s != "" {
				args = append(args, "-ldflags", "-X github.com/mgrpo/mgrpo/internal/buildinfo.version="+s)
			}
			cmd := exec.Command("go", append(args, "./cmd/mgrpo-node")...)
			cmd.Dir = ".."
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build: %v\n%s", err, b)
				return
			}
			binaries[s] = out
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binaries[suffix]
}

// proc is a running mgrpo-node with its output collected.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// start runs bin with args; the process is killed when the test ends.
func start(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.text())
		}
	})
	return p
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the output holds a line matching re (the deadline
// only marks failure) and returns the submatches of its first match.
func (p *proc) waitFor(t *testing.T, re string, within time.Duration) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(p.text()); m != nil {
			return m
		}
		select {
		case <-p.done:
			if m := rx.FindStringSubmatch(p.text()); m != nil {
				return m
			}
			t.Fatalf("%s exited (%v) before printing %q", p.name, p.err, re)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not print %q within %v", p.name, re, within)
	return nil
}

// exit waits for the process to end and returns its exit code.
func (p *proc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still running after %v", p.name, within)
	}
	if p.err == nil {
		return 0
	}
	if e, ok := p.err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

func (p *proc) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// freePort returns a port that was free a moment ago on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runFlags is a short synchronous run of the tiny preset whose 8 prompts
// make 4 parts of 2, so that two generators share every step.
func runFlags(dir, name string, steps int) []string {
	return []string{"--model.preset", "tiny", "--train.warm_start_steps", "0", "--train.steps", fmt.Sprint(steps),
		"--train.prompts_per_step", "8", "--train.prompts_per_part", "2", "--generation.num_generations", "4",
		"--train.eval_every", "5", "--train.eval_prompts", "32", "--train.checkpoint_every", "0",
		"--output.sample_every", "1", "--output.sample_rows", "1000", "--output.dir", dir, "--output.name", name,
		"--cluster.request_timeout", "2m",
		// A tiny policy that never trained earns no reward: the guards would
		// rightly stop it at step 50; these runs test the machinery.
		"--train.guard", "warn"}
}

// metricLines reads a run's metrics.jsonl without the keys that measure
// time, throughput or the cluster (they differ between runs of the same
// numbers).
func metricLines(t *testing.T, run string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if strings.HasPrefix(k, "time/") || strings.HasPrefix(k, "perf/") || strings.HasPrefix(k, "cluster/") {
				delete(m, k)
			}
		}
		out = append(out, m)
	}
	return out
}

// sameRun requires two runs to have the same metrics line for line and
// bit-identical final weights.
func sameRun(t *testing.T, got, want string, steps int) {
	t.Helper()
	g, w := metricLines(t, got), metricLines(t, want)
	if len(g) != len(w) {
		t.Fatalf("%d metrics lines, --role all wrote %d", len(g), len(w))
	}
	for i := range w {
		gb, _ := json.Marshal(g[i])
		wb, _ := json.Marshal(w[i])
		if !bytes.Equal(gb, wb) {
			t.Fatalf("metrics line %d differs:\n%s\n--role all:\n%s", i, gb, wb)
		}
	}
	model := filepath.Join("checkpoints", fmt.Sprintf("step-%d", steps), "model.safetensors")
	a, err1 := os.ReadFile(filepath.Join(got, model))
	b, err2 := os.ReadFile(filepath.Join(want, model))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Fatalf("final model.safetensors differs from --role all's (%v, %v)", err1, err2)
	}
}

// allRun trains the same run in one process (the reference the cluster
// runs must match), with runFlags and extra.
func allRun(t *testing.T, bin, dir string, steps int, extra ...string) string {
	t.Helper()
	p := start(t, bin, "all", append(append(runFlags(dir, "all", steps), "--role", "all"), extra...)...)
	if code := p.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("--role all: exit %d\n%s", code, p.text())
	}
	return filepath.Join(dir, "all")
}

// generatorsIn lists the generators named in a run's sample tables from
// step from on.
func generatorsIn(t *testing.T, run string, from int) []string {
	t.Helper()
	var ids []string
	files, _ := filepath.Glob(filepath.Join(run, "samples", "step_*.json"))
	for _, f := range files {
		var step int
		fmt.Sscanf(filepath.Base(f), "step_%06d.json", &step)
		if step < from {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var table struct {
			Columns []string `json:"columns"`
			Data    [][]any  `json:"data"`
		}
		if err := json.Unmarshal(b, &table); err != nil {
			t.Fatal(err)
		}
		col := slices.Index(table.Columns, "generator")
		for _, row := range table.Data {
			if id, _ := row[col].(string); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// TestLongClusterSameRun: a learner, two generator nodes and a
// reward+reference node, started in shuffled order as separate processes
// on 127.0.0.1, train the same run as --role all: every metrics value and
// the final model.safetensors bit for bit.
func TestLongClusterSameRun(t *testing.T) {
	if testing.Short() {
		t.Skip("long: five processes")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 6
	want := allRun(t, bin, dir, steps)
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	port := strings.Split(seed, ":")[1]
	var learner *proc
	starts := []func(){
		func() {
			learner = start(t, bin, "learner", append(runFlags(dir, "cluster", steps), "--role", "learner", "--cluster.port", port,
				"--cluster.min_generators", "2")...) // both generator nodes draw, whatever the start order
		},
		func() { start(t, bin, "gen-a", "--role", "generator", "--cluster.seeds", seed) },
		func() { start(t, bin, "gen-b", "--role", "generator", "--cluster.seeds", seed) },
		func() { start(t, bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", seed) },
	}
	order := rand.Perm(len(starts))
	t.Logf("start order %v (0 = learner)", order)
	for _, i := range order {
		starts[i]()
	}
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	if n := strings.Count(learner.text(), " joined: "); n != 3 {
		t.Errorf("the learner admitted %d nodes, want 3:\n%s", n, learner.text())
	}
	got := filepath.Join(dir, "cluster")
	sameRun(t, got, want, steps)
	if ids := generatorsIn(t, got, 1); len(ids) != 2 {
		t.Errorf("completions drawn by %v, want both generator nodes", ids)
	}
}

// midRunCluster starts a learner of a run of steps, a generator node and
// a reward+reference node, then, while the run goes, a node A of role
// (generator, or reward,reference), frozen (SIGSTOP) as soon as it has
// joined: the next step hands it a part it will not answer. It returns the
// learner, A and A's node id. The learner does not hedge (cluster.hedge):
// these runs test what becomes of the parts of a node that is dropped, and
// a hedge would have finished them before.
func midRunCluster(t *testing.T, bin, dir string, steps int, role string) (learner, nodeA *proc, idA, seed string) {
	t.Helper()
	seed = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner = start(t, bin, "learner", append(runFlags(dir, "cluster", steps), "--role", "learner", "--cluster.port", strings.Split(seed, ":")[1],
		"--cluster.hedge=false")...)
	start(t, bin, "gen-b", "--role", "generator", "--cluster.seeds", seed).waitFor(t, `joined run`, time.Minute)
	start(t, bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", seed).waitFor(t, `joined run`, time.Minute)
	nodeA = start(t, bin, role+"-a", "--role", role, "--cluster.seeds", seed)
	idA = nodeA.waitFor(t, `node (\S+): joined run`, time.Minute)[1]
	nodeA.signal(t, syscall.SIGSTOP)
	if strings.Contains(learner.text(), "done:") {
		t.Fatalf("the run ended before node A froze: give it more steps")
	}
	return learner, nodeA, idA, seed
}

// checkReissued requires the run's metrics to count a reissued part.
func checkReissued(t *testing.T, run string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil || !strings.Contains(string(raw), `"cluster/reissued_parts":`) {
		t.Errorf("metrics.jsonl does not count the reissued part (%v)", err)
	}
}

// TestLongClusterNodeFailure: a generator node frozen while it holds a
// part is killed (SIGKILL) after a new generator node joined: its part
// goes to the others, the run ends bit-identical to --role all, its
// metrics count the reissue, and the new generator draws completions.
func TestLongClusterNodeFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("long: five processes")
	}
	got, idC := killMidRun(t, "generator")
	if ids := generatorsIn(t, got, 1); !slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(id, idC) }) {
		t.Errorf("the generator that joined mid-run (%s) drew nothing: %v", idC, ids)
	}
}

// TestLongClusterRelayNodeFailure: the same with a reward+reference node,
// frozen while it holds a part relayed from its reward evaluator to its
// reference scorer (both stages in one trip): the part goes to the other
// such node and the run ends bit-identical to --role all.
func TestLongClusterRelayNodeFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("long: five processes")
	}
	killMidRun(t, "reward,reference")
}

// killMidRun runs a cluster in which a node A of role, frozen while it
// holds a part (midRunCluster), is killed (SIGKILL) once a node C of the
// same role has joined, and requires the run to end bit-identical to
// --role all with its metrics counting the reissue. It returns the run's
// directory and C's node id.
func killMidRun(t *testing.T, role string) (run, idC string) {
	t.Helper()
	bin, dir, steps := binary(t, ""), t.TempDir(), 150
	want := allRun(t, bin, dir, steps)
	learner, nodeA, idA, seed := midRunCluster(t, bin, dir, steps, role)
	nodeC := start(t, bin, role+"-c", "--role", role, "--cluster.seeds", seed)
	idC = nodeC.waitFor(t, `node (\S+): joined run`, time.Minute)[1]
	nodeA.signal(t, syscall.SIGKILL)
	learner.waitFor(t, `node `+regexp.QuoteMeta(idA)+` at \S+ left`, time.Minute)
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	run = filepath.Join(dir, "cluster")
	sameRun(t, run, want, steps)
	checkReissued(t, run)
	return run, idC
}

// TestLongClusterHungNode: a generator node frozen (SIGSTOP) while it
// holds a part, past the gRPC keepalive, is dropped and its part reissued;
// woken up (SIGCONT), it learns it was dropped and joins again (or finds
// the run over); its late answer is not counted: the run matches --role
// all.
func TestLongClusterHungNode(t *testing.T) {
	if testing.Short() {
		t.Skip("long: waits for the keepalive")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 150
	want := allRun(t, bin, dir, steps)
	learner, genA, idA, _ := midRunCluster(t, bin, dir, steps, "generator")
	learner.waitFor(t, `node `+regexp.QuoteMeta(idA)+` at \S+ left`, time.Minute)
	genA.signal(t, syscall.SIGCONT)
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	got := filepath.Join(dir, "cluster")
	sameRun(t, got, want, steps)
	checkReissued(t, got)
	genA.waitFor(t, `dropped this node|is gone`, time.Minute)
}

// TestLongClusterHedgesFrozenNode: one of two generator nodes frozen
// (SIGSTOP) for 3 s mid-run, less than the keepalive that would drop it:
// its parts are hedged on the other generator node (cluster.hedge, on by
// default), the frozen node is not dropped, and once woken its late
// answers are ignored; the run ends bit-identical to --role all, and its
// metrics count the hedged parts.
func TestLongClusterHedgesFrozenNode(t *testing.T) {
	if testing.Short() {
		t.Skip("long: five processes")
	}
	h := startClusterRun(t, 150, 2)
	genA := start(t, h.bin, "gen-a", "--role", "generator", "--cluster.seeds", h.seed)
	idA := genA.waitFor(t, `node (\S+): joined run`, time.Minute)[1]
	start(t, h.bin, "gen-b", "--role", "generator", "--cluster.seeds", h.seed).waitFor(t, `joined run`, time.Minute)
	start(t, h.bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", h.seed).waitFor(t, `joined run`, time.Minute)
	freezeMidRun(t, h.run, genA)
	h.checkHedged(t, idA)
}

// TestLongClusterHedgesFrozenRelayNode: one of two reward+reference nodes
// frozen (SIGSTOP) for 3 s mid-run, while the one generator node relays
// parts to it: those parts are hedged through the other reward+reference
// node (by the generator node's one generator), the frozen node is not
// dropped, the run ends bit-identical to --role all, and its metrics count
// the hedged parts. Without hedging the run waits out the freeze.
func TestLongClusterHedgesFrozenRelayNode(t *testing.T) {
	if testing.Short() {
		t.Skip("long: five processes")
	}
	h := startClusterRun(t, 150, 1)
	// Both reward+reference nodes join before the generator node, whose one
	// generator (the default) the run waits for: every step can relay to
	// either, and a hedge goes through the generator that holds the part.
	rrA := start(t, h.bin, "rr-a", "--role", "reward,reference", "--cluster.seeds", h.seed)
	idA := rrA.waitFor(t, `node (\S+): joined run`, time.Minute)[1]
	start(t, h.bin, "rr-b", "--role", "reward,reference", "--cluster.seeds", h.seed).waitFor(t, `joined run`, time.Minute)
	start(t, h.bin, "gen", "--role", "generator", "--cluster.seeds", h.seed).waitFor(t, `joined run`, time.Minute)
	freezeMidRun(t, h.run, rrA)
	h.checkHedged(t, idA)
}

// clusterRun is a run of steps, as --role all (want) and as a cluster
// whose learner waits for so many generator actors: its binary, the
// learner's seed address and the run directory; the test starts the
// worker nodes.
type clusterRun struct {
	bin, seed, run, want string
	steps                int
	learner              *proc
}

// startClusterRun runs --role all, then starts the learner of the same
// run, which waits for generators generator actors before its first step.
func startClusterRun(t *testing.T, steps, generators int) clusterRun {
	t.Helper()
	h := clusterRun{bin: binary(t, ""), steps: steps}
	dir := t.TempDir()
	h.want = allRun(t, h.bin, dir, h.steps)
	h.seed = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	h.learner = start(t, h.bin, "learner", append(runFlags(dir, "cluster", h.steps), "--role", "learner",
		"--cluster.port", strings.Split(h.seed, ":")[1], "--cluster.min_generators", strconv.Itoa(generators))...)
	h.run = filepath.Join(dir, "cluster")
	return h
}

// checkHedged is checkHedged of h's run, whose frozen node is id.
func (h clusterRun) checkHedged(t *testing.T, id string) {
	t.Helper()
	checkHedged(t, h.learner, id, h.run, h.want, h.steps)
}

// freezeMidRun waits for a few steps of run (the pools then know how fast
// their nodes answer) and freezes node (SIGSTOP) for 3 s, less than the
// keepalive that would drop it; the run must go on without it meanwhile
// (ten steps or more: tiny's take milliseconds).
func freezeMidRun(t *testing.T, run string, node *proc) {
	t.Helper()
	lines := func() int {
		raw, _ := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
		return strings.Count(string(raw), "\n")
	}
	for deadline := time.Now().Add(time.Minute); lines() <= 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	node.signal(t, syscall.SIGSTOP)
	before := lines()
	time.Sleep(3 * time.Second)
	during := lines() - before
	node.signal(t, syscall.SIGCONT)
	if during < 10 {
		t.Errorf("the run wrote %d metrics lines while the node was frozen, want 10 or more: it waited for the node", during)
	}
}

// checkHedged requires the learner to end its run (exit 0) without
// dropping the node id, the run to match --role all's (want), and its
// metrics to count hedged parts.
func checkHedged(t *testing.T, learner *proc, id, run, want string, steps int) {
	t.Helper()
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	if regexp.MustCompile(`node ` + regexp.QuoteMeta(id) + ` at \S+ left`).MatchString(learner.text()) {
		t.Errorf("the learner dropped the frozen node; a hedge should have spared it:\n%s", learner.text())
	}
	sameRun(t, run, want, steps)
	raw, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil || !strings.Contains(string(raw), `"cluster/hedged_parts":`) {
		t.Errorf("metrics.jsonl does not count hedged parts (%v)", err)
	}
}

// TestLongClusterLearnerRestart: the learner node killed (SIGKILL) mid-run
// and started again with --resume goes on from its last checkpoint; the
// worker nodes, left running, notice it is gone, wait, and join the new
// learner by themselves; the run ends as --role all's: every metrics line
// and the final weights bit for bit.
func TestLongClusterLearnerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("long: four processes and a restart")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 150
	every := []string{"--train.checkpoint_every", "10"}
	want := allRun(t, bin, dir, steps, every...)
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	port := strings.Split(seed, ":")[1]
	learner := start(t, bin, "learner", append(append(runFlags(dir, "cluster", steps), "--role", "learner", "--cluster.port", port), every...)...)
	gen := start(t, bin, "generator", "--role", "generator", "--cluster.seeds", seed)
	rr := start(t, bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", seed)
	run := filepath.Join(dir, "cluster")
	waitFile(t, filepath.Join(run, "checkpoints", "step-20", "MANIFEST.sha256"), 2*time.Minute, learner)
	learner.signal(t, syscall.SIGKILL)
	learner.exit(t, time.Minute)
	if strings.Contains(learner.text(), "done:") {
		t.Fatalf("the run ended before the learner was killed: give it more steps")
	}
	for _, w := range []*proc{gen, rr} {
		w.waitFor(t, `the learner at \S+ is gone \(nothing listens there any more\); waiting for a learner`, time.Minute)
	}
	again := start(t, bin, "learner-again", "--resume", run, "--role", "learner", "--cluster.port", port)
	again.waitFor(t, `resumed from \S+ at step \d+`, time.Minute)
	if code := again.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("resumed learner: exit %d\n%s", code, again.text())
	}
	for _, w := range []*proc{gen, rr} {
		if n := strings.Count(w.text(), ": joined run "); n != 2 {
			t.Errorf("%s joined %d times, want 2 (before and after the restart):\n%s", w.name, n, w.text())
		}
	}
	sameRun(t, run, want, steps)
}

// TestLongClusterRefusals: nodes that must not take part cannot, and say
// why in one line: a certificate of another CA or none against a TLS
// learner, another build; and a learner that cannot be safe or whose
// messages cannot fit stops at once with exit 2.
func TestLongClusterRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("long: several processes")
	}
	bin, dir := binary(t, ""), t.TempDir()
	ok, other := certs(t, bin, dir, "ok", 3), certs(t, bin, dir, "other", 3)
	oneLine := func(t *testing.T, p *proc, code int, want string) {
		t.Helper()
		if got := p.exit(t, time.Minute); got != code || !strings.Contains(p.text(), want) || strings.Count(strings.TrimSpace(p.text()), "\n") > 1 {
			t.Errorf("%s: exit %d, output %q; want exit %d and a line with %q", p.name, got, p.text(), code, want)
		}
	}
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	port := strings.Split(seed, ":")[1]
	learner := start(t, bin, "learner", append(append(runFlags(dir, "tls", 4), "--role", "learner", "--cluster.port", port), tlsFlags(ok, "node-1")...)...)
	learner.waitFor(t, `waiting for a node of role generator, reward, reference`, time.Minute)

	stranger := start(t, bin, "other CA", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(other, "node-1")...)...)
	stranger.waitFor(t, `(?m)^node \S+: generator`, time.Minute)
	if got := stranger.exit(t, time.Minute); got != 2 || !strings.Contains(stranger.text(), "certificate") {
		t.Errorf("a node with another CA's certificate: exit %d, output %q; want exit 2 naming the certificate", got, stranger.text())
	}
	plain := start(t, bin, "no TLS", "--role", "generator", "--cluster.seeds", seed)
	if got := plain.exit(t, time.Minute); got != 2 || !strings.Contains(plain.text(), "uses mutual TLS") {
		t.Errorf("a node without TLS: exit %d, output %q; want exit 2 saying the learner uses mutual TLS", got, plain.text())
	}
	foreign := start(t, binary(t, "other"), "other build", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(ok, "node-2")...)...)
	if got := foreign.exit(t, time.Minute); got != 1 || !strings.Contains(foreign.text(), "refused by the learner") || !strings.Contains(foreign.text(), "build") {
		t.Errorf("another build: exit %d, output %q; want exit 1, refused for its build", got, foreign.text())
	}
	learner.waitFor(t, `refused node \S+ at \S+: build`, time.Minute)
	if strings.Contains(learner.text(), " joined: ") {
		t.Errorf("a refused node joined:\n%s", learner.text())
	}
	// The learner is still waiting; a node with a good certificate joins
	// and, with a reward+reference node, the run trains to the end.
	start(t, bin, "gen", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(ok, "node-2")...)...)
	start(t, bin, "rr", append([]string{"--role", "reward,reference", "--cluster.seeds", seed}, tlsFlags(ok, "node-3")...)...)
	if code := learner.exit(t, 5*time.Minute); code != 0 || strings.Count(learner.text(), " joined: ") != 2 {
		t.Fatalf("learner with good nodes: exit %d\n%s", code, learner.text())
	}

	oneLine(t, start(t, bin, "public host", "--role", "learner", "--cluster.host", "0.0.0.0"), 2, "cluster.host")
	oneLine(t, start(t, bin, "chunk", "--role", "learner", "--cluster.weight_chunk_bytes", "70000000"), 2, "cluster.weight_chunk_bytes")
	oneLine(t, start(t, bin, "message", append(runFlags(dir, "msg", 2), "--role", "learner", "--cluster.port", fmt.Sprint(freePort(t)),
		"--cluster.max_message_bytes", "4194304", "--cluster.weight_chunk_bytes", "4000000")...), 2, "cluster.max_message_bytes")
}

// hangingPort is a listener on 127.0.0.1 that accepts every connection
// and never answers, until the test ends; it returns its address.
func hangingPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestLongWorkerWaitingNamesEverySeed: a worker whose seeds hang or
// refuse says, while it waits, why each shows no learner, in the order
// of its --cluster.seeds (its seeds are asked at once: node.ProbeSeeds;
// a hung one said "context deadline exceeded").
func TestLongWorkerWaitingNamesEverySeed(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a worker process waits for its first notice")
	}
	seeds := []string{hangingPort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t)), hangingPort(t)}
	w := start(t, binary(t, ""), "generator", "--role", "generator", "--cluster.seeds", strings.Join(seeds, ","))
	q := regexp.QuoteMeta
	line := w.waitFor(t, `waiting for a learner of cluster \S+ at `+q(strings.Join(seeds, ", "))+` \(`+
		q(seeds[0])+`: no answer within 2s; `+q(seeds[1])+`: dial: connect: connection refused; `+q(seeds[2])+`: no answer within 2s\)`, time.Minute)
	t.Log(line[0])
}
