package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/trace"
)

// jaeger is a real Jaeger v2 (built by make jaeger into .tools/bin) on
// free loopback ports, with in-memory storage, stopped when the test ends.
type jaeger struct {
	otlp, query string // host:port of OTLP gRPC, base URL of the query API
}

// startJaeger starts Jaeger, or skips the test when it has not been built
// (make test builds it first).
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin, err := filepath.Abs("../.tools/bin/jaeger")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("Jaeger is not built: run make jaeger (make test does)")
	}
	tmpl, err := os.ReadFile("testdata/jaeger-local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(tmpl)
	j := &jaeger{}
	for _, p := range []string{"4317", "4318", "16686", "16685", "13133"} {
		port := fmt.Sprint(freePort(t))
		cfg = strings.ReplaceAll(cfg, "127.0.0.1:"+p, "127.0.0.1:"+port)
		switch p {
		case "4317":
			j.otlp = "127.0.0.1:" + port
		case "16686":
			j.query = "http://127.0.0.1:" + port
		}
	}
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, bin, "jaeger", "--config", "file:"+path)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(j.query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger's query API at %s did not answer: %v", j.query, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stepTraces reads the step traces of run from Jaeger, waiting (the
// deadline only marks failure) until ok accepts them.
func (j *jaeger) stepTraces(t *testing.T, run string, ok func([]trace.StepTrace) bool) []trace.StepTrace {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		tags, _ := json.Marshal(map[string]string{"mgrpo.run": run})
		resp, err := http.Get(j.query + "/api/traces?service=mgrpo&operation=step&limit=1000&lookback=1h&tags=" + string(tags))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			traces, err := trace.ParseJaeger(body)
			if err == nil && ok(traces) {
				return traces
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger never held the traces of run %s that the test waits for", run)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stageSpans are the span names every step trace holds.
var stageSpans = []string{"step", "generate_reference", "generator.request", "generate.part",
	"reward.part", "reward.function", "reference.part", "prepare",
	"learner.request", "learn", "learn.forward", "learn.backward", "learn.optimizer", "controller.request", "control"}

// checkTrace requires a step trace of a run of steps steps to hold every
// stage's spans (and, but on the last step, the publish of the weights the
// step made, and the extra ones: no step follows the last to use them),
// each span's parent in the trace, and the attributes a person reads.
func checkTrace(t *testing.T, tr trace.StepTrace, steps int, extra ...string) (nodes []string) {
	t.Helper()
	ids := map[string]bool{}
	var names []string
	for _, s := range tr.Spans {
		ids[s.ID] = true
		names = append(names, s.Name)
		if !slices.Contains(nodes, s.Node) {
			nodes = append(nodes, s.Node)
		}
	}
	want := stageSpans
	if tr.Root.Attrs["mgrpo.step"] != fmt.Sprint(steps) {
		want = append(append(slices.Clone(stageSpans), "publish"), extra...)
	}
	for _, want := range want {
		if !slices.Contains(names, want) {
			t.Errorf("trace %s has no %s span (spans: %v)", tr.ID, want, names)
		}
	}
	for _, s := range tr.Spans[1:] {
		if !ids[s.Parent] {
			t.Errorf("span %s (%s) has parent %q, not in the trace", s.Name, s.ID, s.Parent)
		}
		if strings.HasSuffix(s.Name, ".part") && s.Attrs["mgrpo.actor"] == "" {
			t.Errorf("span %s names no actor", s.Name)
		}
	}
	for _, k := range []string{"mgrpo.run", "mgrpo.step", "mgrpo.policy_version", "mgrpo.prompts", "mgrpo.completions", "mgrpo.tokens"} {
		if tr.Root.Attrs[k] == "" {
			t.Errorf("root span lacks %s: %v", k, tr.Root.Attrs)
		}
	}
	return nodes
}

// traceFlags export every step's spans to j.
func (j *jaeger) traceFlags() []string {
	return []string{"--trace.otlp_endpoint", j.otlp, "--trace.sample_ratio", "1"}
}

// TestLongTraceJaeger: a short run traced into a real Jaeger, first in one
// process, then as a learner, a generator node and a reward+reference node:
// every step is one trace holding spans of every stage, parents correct and
// attributes present; across processes the spans of one step come from
// three nodes (service.instance.id) under one root, the generator node's
// taking of the weights the step published among them.
func TestLongTraceJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("long: Jaeger and several processes")
	}
	j := startJaeger(t)
	bin, dir, steps := binary(t, ""), t.TempDir(), 3
	all := start(t, bin, "all", append(append(runFlags(dir, "traced-all", steps), "--role", "all"), j.traceFlags()...)...)
	if code := all.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("--role all: exit %d\n%s", code, all.text())
	}
	traces := j.stepTraces(t, "traced-all", func(ts []trace.StepTrace) bool { return len(ts) == steps })
	for _, tr := range traces {
		checkTrace(t, tr, steps)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "traced-all", "metrics.jsonl"))
	for _, tr := range traces {
		if !strings.Contains(string(raw), `"trace_id":"`+tr.ID+`"`) {
			t.Errorf("metrics.jsonl does not lead to trace %s", tr.ID)
		}
	}

	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner := start(t, bin, "learner", append(append(runFlags(dir, "traced-cluster", steps), "--role", "learner",
		"--cluster.port", strings.Split(seed, ":")[1]), j.traceFlags()...)...)
	gen := start(t, bin, "gen", "--role", "generator", "--cluster.seeds", seed)
	rr := start(t, bin, "rr", "--role", "reward,reference", "--cluster.seeds", seed)
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	gen.signal(t, syscall.SIGINT) // a worker exports its last spans as it stops
	rr.signal(t, syscall.SIGINT)
	gen.exit(t, time.Minute)
	rr.exit(t, time.Minute)
	traces = j.stepTraces(t, "traced-cluster", func(ts []trace.StepTrace) bool {
		return len(ts) == steps && len(checkNodes(ts[0])) >= 3
	})
	for _, tr := range traces {
		if nodes := checkTrace(t, tr, steps, "publish.generator", "weights"); len(nodes) < 3 {
			t.Errorf("trace %s has spans from %v, want the learner and both worker nodes", tr.ID, nodes)
		}
	}
}

// checkNodes lists the service.instance.id of a trace's spans.
func checkNodes(tr trace.StepTrace) []string {
	var nodes []string
	for _, s := range tr.Spans {
		if !slices.Contains(nodes, s.Node) {
			nodes = append(nodes, s.Node)
		}
	}
	return nodes
}

// TestLongTraceSlowStep: a generator node frozen for 2 s (SIGSTOP) during
// a run makes one step slow: the learner marks it and prints its trace id,
// and `mgrpo-node traces --slow` lists that trace first, with the generator
// as the largest share of its critical path.
func TestLongTraceSlowStep(t *testing.T) {
	if testing.Short() {
		t.Skip("long: Jaeger and several processes")
	}
	j := startJaeger(t)
	bin, dir, steps := binary(t, ""), t.TempDir(), 120
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner := start(t, bin, "learner", append(append(runFlags(dir, "slow", steps), "--role", "learner",
		"--cluster.port", strings.Split(seed, ":")[1], "--train.eval_every", "0"), j.traceFlags()...)...)
	start(t, bin, "rr", "--role", "reward,reference", "--cluster.seeds", seed).waitFor(t, `joined run`, time.Minute)
	gen := start(t, bin, "gen", "--role", "generator", "--cluster.seeds", seed)
	gen.waitFor(t, `joined run`, time.Minute)
	metrics := filepath.Join(dir, "slow", "metrics.jsonl")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) { // let the median settle
		if raw, _ := os.ReadFile(metrics); strings.Count(string(raw), "\n") > 15 || time.Now().After(deadline) {
			break
		}
	}
	before := len(learner.text())
	gen.signal(t, syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	gen.signal(t, syscall.SIGCONT)
	slowLine := `step (\d+) slow: ([0-9.]+)s \(threshold [0-9.]+s\), trace ([0-9a-f]{32})`
	learner.waitFor(t, slowLine, time.Minute)
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	// The frozen step is the slowest marked after the freeze (a loaded
	// machine marks natural ones too).
	var m []string
	for _, l := range regexp.MustCompile(slowLine).FindAllStringSubmatch(learner.text()[before:], -1) {
		if secs, _ := strconv.ParseFloat(l[2], 64); m == nil || secs > must(strconv.ParseFloat(m[2], 64)) {
			m = l
		}
	}
	if m == nil {
		t.Fatalf("no step marked slow after the generator was frozen:\n%s", learner.text())
	}
	id := m[3]
	j.stepTraces(t, "slow", func(ts []trace.StepTrace) bool {
		return slices.ContainsFunc(ts, func(tr trace.StepTrace) bool { return tr.ID == id && tr.Slow() })
	})
	html := filepath.Join(dir, "slow.html")
	out, err := exec.Command(bin, "traces", "--slow", "--run", "slow", "--limit", "3", "--query_url", j.query, "--html", html).CombinedOutput()
	if err != nil {
		t.Fatalf("traces --slow: %v\n%s", err, out)
	}
	first := regexp.MustCompile(`(?m)^step (\d+) .*/trace/([0-9a-f]+)$`).FindStringSubmatch(string(out))
	if first == nil || first[2] != id || first[1] != m[1] {
		t.Fatalf("traces --slow listed first %v, want step %s trace %s:\n%s", first, m[1], id, out)
	}
	// The frozen generator holds the largest share: its request's wait
	// when the freeze came between parts, the part it was generating
	// (generate.part, the request's child on its node) when it came during
	// one.
	largest := regexp.MustCompile(`largest share: (\S+) (\S+) on`).FindStringSubmatch(string(out))
	if largest == nil || (largest[1] != "generator.request" && largest[1] != "generate.part") || !strings.HasPrefix(largest[2], "generator-") {
		t.Errorf("the slow step's largest critical-path share is %v, want the generator's request or part:\n%s", largest, out)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), id) || !strings.Contains(string(page), "<svg") {
		t.Errorf("traces --html wrote no waterfall of trace %s (%v)", id, err)
	}
	// No steps of that run: one line, exit 0.
	none, err := exec.Command(bin, "traces", "--slow", "--run", "no-such-run", "--query_url", j.query).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(none), "no step traces") || strings.Count(string(none), "\n") != 1 {
		t.Errorf("traces of no run: %v, output %q; want exit 0 and one line", err, none)
	}
	// Jaeger unreachable: one line, exit 1.
	bad := exec.Command(bin, "traces", "--slow", "--query_url", "http://127.0.0.1:1")
	b, err := bad.CombinedOutput()
	if code := bad.ProcessState.ExitCode(); code != 1 || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
		t.Errorf("traces against no Jaeger: exit %d (%v), output %q; want exit 1 and one line", code, err, b)
	}
}

// must returns v, ignoring err (for values a regular expression checked).
func must[T any](v T, _ error) T { return v }
