package meter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel"
)

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

// series are the samples of a Prometheus text page, read by the
// Prometheus client's own parser.
type series []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parse reads a Prometheus text page (counters, gauges and untyped
// samples; histograms are left out).
func parse(t *testing.T, text string) series {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, text)
	}
	var out series
	for name, f := range families {
		for _, m := range f.GetMetric() {
			s := sample{name: name, labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				s.value = m.GetUntyped().GetValue()
			default:
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// value is the value of the first sample of name that has labels.
func (ss series) value(name string, labels map[string]string) (float64, bool) {
	for _, s := range ss {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// scrape fetches url and returns the body.
func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, res.Status, err)
	}
	return string(b)
}

func TestOff(t *testing.T) {
	p, err := New(context.Background(), Options{ServiceName: "mgrpo"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Instruments() != nil || p.MeterProvider() != nil || p.PrometheusURL() != "" {
		t.Errorf("metrics off: instruments %v, provider %v, url %q", p.Instruments(), p.MeterProvider(), p.PrometheusURL())
	}
	var in *Instruments // every method of a nil one does nothing
	in.Step(1, false, map[string]float64{"a": 1})
	in.Part("generate", false)
	in.Generated("g", 3, 1)
	in.Queue("generator", 1, 2)
	in.WeightsSent(10)
	in.WatchSupervision(nil)()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestPrometheus records every instrument and reads the Prometheus text
// of the endpoint: each series with its labels and value.
func TestPrometheus(t *testing.T) {
	ctx := context.Background()
	p, err := New(ctx, Options{ServiceName: "mgrpo", InstanceID: "node-1", Roles: []string{"all"}, Host: "127.0.0.1", PrometheusPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	if otel.GetMeterProvider() != p.MeterProvider() {
		t.Errorf("the global meter provider is not the node's: proto.actor would not record")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithMetricProviders(p.MeterProvider()),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	in := p.Instruments()
	stop := in.WatchSupervision(sys)
	defer stop()
	in.Step(3, false, map[string]float64{"train/reward": 0.25})
	in.Step(4, true, nil)
	in.Part("generate", false)
	in.Part("generate", false)
	in.Part("reward", true)
	in.Generated("generator-0", 120, 2)
	in.Queue("generator", 2, 5)
	in.WeightsSent(1000)
	in.WeightsSent(24)
	in.WeightsReceived(7)
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: actor.NewPID("local", "generator-1"), Directive: actor.RestartDirective})
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	sys.Root.Send(pid, "hello")
	got := parse(t, scrape(t, p.PrometheusURL()))
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64 // NaN: present, any value
	}{
		{"mgrpo_steps_total", map[string]string{"outcome": "trained"}, 1},
		{"mgrpo_steps_total", map[string]string{"outcome": "skipped"}, 1},
		{"mgrpo_step", nil, 4},
		{"mgrpo_metric", map[string]string{"key": "train/reward"}, 0.25},
		{"mgrpo_parts_total", map[string]string{"stage": "generate", "outcome": "done"}, 2},
		{"mgrpo_parts_total", map[string]string{"stage": "reward", "outcome": "skipped"}, 1},
		{"mgrpo_generated_tokens_total", nil, 120},
		{"mgrpo_tokens_per_second", map[string]string{"actor": "generator-0"}, 60},
		{"mgrpo_queue_depth", map[string]string{"pool": "generator", "state": "waiting"}, 2},
		{"mgrpo_queue_depth", map[string]string{"pool": "generator", "state": "in_flight"}, 5},
		{"mgrpo_actor_failures_total", map[string]string{"actor": "generator-1", "directive": "restart"}, 1},
		{"mgrpo_weight_sync_bytes_total", map[string]string{"direction": "sent"}, 1024},
		{"mgrpo_weight_sync_bytes_total", map[string]string{"direction": "received"}, 7},
		{"target_info", map[string]string{"service_instance_id": "node-1", "service_name": "mgrpo", "mgrpo_roles": "all"}, 1},
		{"protoactor_actor_spawn_count_total", nil, math.NaN()},
		{"go_goroutines", nil, math.NaN()},
		{"process_cpu_seconds_total", nil, math.NaN()},
	} {
		v, ok := got.value(c.name, c.labels)
		if !ok || (!math.IsNaN(c.want) && v != c.want) {
			t.Errorf("%s%v = %v (present %t), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
}

// TestProfiles: with output.pprof Go's profiles are served beside the
// metrics (the index, a heap profile, a short CPU profile); without it
// the path is not found.
func TestProfiles(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		p, err := New(ctx, Options{ServiceName: "mgrpo", Host: "127.0.0.1", PrometheusPort: freePort(t), Pprof: on})
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(p.PrometheusURL(), metricsPath) + profilesPath
		if got, want := p.ProfilesURL(), map[bool]string{true: base, false: ""}[on]; got != want {
			t.Errorf("pprof %t: ProfilesURL %q, want %q", on, got, want)
		}
		if !on {
			res, err := http.Get(base)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("pprof off: GET %s: %s, want 404", base, res.Status)
			}
			p.Shutdown(ctx)
			continue
		}
		for path, want := range map[string]string{"": "goroutine", "heap?debug=1": "heap profile", "profile?seconds=1": ""} {
			if body := scrape(t, base+path); !strings.Contains(body, want) || body == "" {
				t.Errorf("GET %s%s: %d bytes, want %q in them", base, path, len(body), want)
			}
		}
		p.Shutdown(ctx)
	}
}

// TestPortTaken: a port in use is one error naming the key.
func TestPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = New(context.Background(), Options{ServiceName: "mgrpo", Host: "127.0.0.1", PrometheusPort: l.Addr().(*net.TCPAddr).Port})
	if !errors.Is(err, ErrBind) || !strings.HasPrefix(err.Error(), "output.prometheus_port ") {
		t.Errorf("New on a taken port: %v", err)
	}
}

// TestOTLP: Shutdown pushes the metrics to an OTLP/HTTP collector (a
// test server standing in for one), whose request carries the node's
// instruments and resource.
func TestOTLP(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/v1/metrics" {
			bodies = append(bodies, b)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	ctx := context.Background()
	p, err := New(ctx, Options{ServiceName: "mgrpo", InstanceID: "node-2", OTLPEndpoint: strings.TrimPrefix(srv.URL, "http://"), Protocol: "http"})
	if err != nil {
		t.Fatal(err)
	}
	if p.PrometheusURL() != "" {
		t.Errorf("no port given, yet a Prometheus endpoint at %s", p.PrometheusURL())
	}
	p.Instruments().Step(1, false, map[string]float64{"train/loss": 0.5})
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := bytes.Join(bodies, nil)
	for _, want := range []string{nameSteps, nameStep, nameMetric, "train/loss", "node-2"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the collector received no %q (%d requests)", want, len(bodies))
		}
	}
}
