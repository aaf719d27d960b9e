// Package otlp holds what a node's spans (actors/trace) and metrics
// (actors/meter) share: the resource that names the node, and the OTLP
// exporters of each protocol (one place knows which exporter a protocol
// takes).
package otlp

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporters build the exporters of one protocol, each sending to an
// endpoint (host:port) without TLS. They connect lazily, so an unreachable
// collector costs dropped data, never a failed run.
type Exporters struct {
	Spans   func(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error)
	Metrics func(ctx context.Context, endpoint string) (sdkmetric.Exporter, error)
}

// byProtocol are the exporters of each protocol.
var byProtocol = map[string]Exporters{
	"grpc": {
		Spans: func(ctx context.Context, e string) (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(e), otlptracegrpc.WithInsecure())
		},
		Metrics: func(ctx context.Context, e string) (sdkmetric.Exporter, error) {
			return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(e), otlpmetricgrpc.WithInsecure())
		},
	},
	"http": {
		Spans: func(ctx context.Context, e string) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(e), otlptracehttp.WithInsecure())
		},
		Metrics: func(ctx context.Context, e string) (sdkmetric.Exporter, error) {
			return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(e), otlpmetrichttp.WithInsecure())
		},
	},
}

// For returns the exporters of protocol: "http", or gRPC (the default) for
// anything else.
func For(protocol string) Exporters {
	if e, ok := byProtocol[protocol]; ok {
		return e
	}
	return byProtocol["grpc"]
}

// Exporter builds an exporter with build, naming the setting (key,
// endpoint) in its error.
func Exporter[E any](ctx context.Context, key, endpoint string, build func(context.Context, string) (E, error)) (E, error) {
	exp, err := build(ctx, endpoint)
	if err != nil {
		var none E
		return none, fmt.Errorf("%s %s: %w", key, endpoint, err)
	}
	return exp, nil
}

// Resource names a node in its spans and metrics: the service
// (service.name), the node (service.instance.id), its build
// (service.version) and its roles (mgrpo.roles).
func Resource(ctx context.Context, service, node, build string, roles []string) (*resource.Resource, error) {
	return resource.New(ctx, resource.WithAttributes(
		attribute.String("service.name", service),
		attribute.String("service.instance.id", node),
		attribute.String("service.version", build),
		attribute.String("mgrpo.roles", strings.Join(roles, ",")),
	))
}
