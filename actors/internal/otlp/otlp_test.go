package otlp

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// TestForPicksProtocol: "http" has its own exporters, anything else is
// gRPC's, and each builds (lazily: no collector is needed).
func TestForPicksProtocol(t *testing.T) {
	ctx := context.Background()
	for _, p := range []string{"http", "grpc", ""} {
		e := For(p)
		want := map[bool]string{true: "http", false: "grpc"}[p == "http"]
		if reflect.ValueOf(e.Spans).Pointer() != reflect.ValueOf(byProtocol[want].Spans).Pointer() {
			t.Errorf("protocol %q: not the %s exporters", p, want)
		}
		spans, err := e.Spans(ctx, "127.0.0.1:1")
		if err != nil {
			t.Fatalf("protocol %q: spans: %v", p, err)
		}
		metrics, err := e.Metrics(ctx, "127.0.0.1:1")
		if err != nil {
			t.Fatalf("protocol %q: metrics: %v", p, err)
		}
		spans.Shutdown(ctx)   //nolint:errcheck // nothing was exported
		metrics.Shutdown(ctx) //nolint:errcheck // nothing was exported
	}
}

// TestExporterNamesTheSetting: a failure names the key and endpoint.
func TestExporterNamesTheSetting(t *testing.T) {
	bad := errors.New("bad")
	_, err := Exporter(context.Background(), "trace.otlp_endpoint", "h:1", func(context.Context, string) (int, error) { return 0, bad })
	if !errors.Is(err, bad) || err.Error() != "trace.otlp_endpoint h:1: bad" {
		t.Errorf("error %v, want one naming the key and endpoint", err)
	}
}

// TestResourceNamesTheNode: the resource carries the service, node, build
// and roles.
func TestResourceNamesTheNode(t *testing.T) {
	r, err := Resource(context.Background(), "mgrpo", "learner-h-1", "dev", []string{"learner", "reward"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range r.Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, want := range map[string]string{"service.name": "mgrpo", "service.instance.id": "learner-h-1", "service.version": "dev", "mgrpo.roles": "learner,reward"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}
