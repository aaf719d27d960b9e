package tests

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// promValue scrapes url and returns the sum of the samples of counter or
// gauge name whose labels include labels (ok false while the endpoint
// does not answer or has no such sample). The page is read by the
// Prometheus client's own text parser.
func promValue(url, name string, labels map[string]string) (sum float64, ok bool) {
	res, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return 0, false
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return 0, false
	}
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		ok = true
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum, ok
}

// advances waits until name{labels} at url is seen at two growing
// values, failing if p exits first (the deadline only marks failure).
func advances(t *testing.T, p *proc, url, name string, labels map[string]string) (first, second float64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	seen := 0
	for seen < 2 && time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited before %s%v at %s was seen to advance", p.name, name, labels, url)
		case <-time.After(100 * time.Millisecond):
		}
		v, ok := promValue(url, name, labels)
		switch {
		case !ok || v == 0:
		case seen == 0:
			first, seen = v, 1
		case v > first:
			second, seen = v, 2
		}
	}
	if seen < 2 {
		t.Fatalf("%s%v at %s did not advance (first %v)", name, labels, url, first)
	}
	return first, second
}

// TestLongClusterMetrics: a learner, a generator node and a
// reward+reference node, each a separate process with its own
// output.prometheus_port on 127.0.0.1, serve their metrics during the
// run: the learner's step counter and the generator node's part counter
// advance between scrapes, weight bytes are counted on both sides, and
// proto.actor's own actor metrics are on every node.
func TestLongClusterMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("long: three processes")
	}
	bin, dir := binary(t, ""), t.TempDir()
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ports := []int{freePort(t), freePort(t), freePort(t)}
	url := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[i]) }
	learner := start(t, bin, "learner", append(runFlags(dir, "metrics", 100000), "--role", "learner",
		"--cluster.port", strings.Split(seed, ":")[1], "--output.prometheus_port", fmt.Sprint(ports[0]))...)
	gen := start(t, bin, "generator", "--role", "generator", "--cluster.seeds", seed, "--output.prometheus_port", fmt.Sprint(ports[1]))
	start(t, bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", seed, "--output.prometheus_port", fmt.Sprint(ports[2]))
	learner.waitFor(t, `metrics for Prometheus at `+url(0), time.Minute)
	gen.waitFor(t, `metrics for Prometheus at `+url(1), time.Minute)

	a, b := advances(t, learner, url(0), "mgrpo_steps_total", map[string]string{"outcome": "trained"})
	t.Logf("learner mgrpo_steps_total %v, then %v", a, b)
	a, b = advances(t, gen, url(1), "mgrpo_parts_total", map[string]string{"stage": "generate", "outcome": "done"})
	t.Logf("generator node mgrpo_parts_total{stage=generate} %v, then %v", a, b)
	for _, c := range []struct {
		node   int
		name   string
		labels map[string]string
	}{
		{0, "mgrpo_weight_sync_bytes_total", map[string]string{"direction": "sent"}},
		{0, "mgrpo_queue_depth", map[string]string{"pool": "generator", "state": "in_flight"}},
		{1, "mgrpo_weight_sync_bytes_total", map[string]string{"direction": "received"}},
		{1, "mgrpo_generated_tokens_total", nil},
		{2, "mgrpo_parts_total", map[string]string{"stage": "reward"}},
		{2, "mgrpo_parts_total", map[string]string{"stage": "reference"}},
		{2, "mgrpo_weight_sync_bytes_total", map[string]string{"direction": "received"}},
		{0, "protoactor_actor_spawn_count_total", nil},
		{1, "protoactor_actor_spawn_count_total", nil},
		{2, "protoactor_actor_spawn_count_total", nil},
	} {
		if _, ok := promValue(url(c.node), c.name, c.labels); !ok {
			t.Errorf("%s has no %s%v", url(c.node), c.name, c.labels)
		}
	}
	learner.signal(t, syscall.SIGINT)
	if code := learner.exit(t, 5*time.Minute); code != 3 { // interrupted: checkpointed, resumable
		t.Fatalf("learner: exit %d, want 3\n%s", code, learner.text())
	}
}
