package otlp

import (
	"errors"
	"testing"
)

// TestExporterPicksProtocol: "http" builds the HTTP exporter, anything
// else the gRPC one, and a failure names the key and endpoint.
func TestExporterPicksProtocol(t *testing.T) {
	viaHTTP := func() (string, error) { return "http", nil }
	viaGRPC := func() (string, error) { return "grpc", nil }
	for _, tc := range []struct{ protocol, want string }{{"http", "http"}, {"grpc", "grpc"}, {"", "grpc"}} {
		if got, err := Exporter(tc.protocol, "k", "e", viaHTTP, viaGRPC); err != nil || got != tc.want {
			t.Errorf("protocol %q: %q, %v; want %q", tc.protocol, got, err, tc.want)
		}
	}
	bad := errors.New("bad")
	_, err := Exporter("http", "trace.otlp_endpoint", "h:1", func() (string, error) { return "", bad }, viaGRPC)
	if !errors.Is(err, bad) || err.Error() != "trace.otlp_endpoint h:1: bad" {
		t.Errorf("error %v, want one naming the key and endpoint", err)
	}
}
