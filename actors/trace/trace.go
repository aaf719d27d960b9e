// Package trace sets up OpenTelemetry tracing for one node and carries
// span context in messages.
//
// A node's Provider exports spans over OTLP (gRPC or HTTP), to a JSONL
// file, or nowhere (the default: a no-op tracer whose spans cost nothing).
// Its resource names the service (trace.service_name), the node
// (service.instance.id), the build (service.version) and the node's roles
// (mgrpo.roles). Sampling is decided once per step, at its root span
// (trace.sample_ratio); every other span follows its parent, across
// nodes too, so a sampled step has all its spans and an unsampled one
// none.
//
// The W3C trace context of the span that sent a message travels in its
// StepMeta.trace map: Inject writes it into a header being built,
// Extract reads it from a received one. The map of a message already
// sent is never written (messages are immutable): WithSpan derives a
// new header.
//
// It imports OpenTelemetry, messages and actors/internal/otlp (the node's
// resource and the exporters of a protocol, shared with actors/meter);
// nothing of actors.
//
//	p, err := trace.New(ctx, trace.Options{ServiceName: "mgrpo", InstanceID: id, OTLPEndpoint: "127.0.0.1:4317"})
//	ctx, span := p.Tracer().Start(ctx, "step", oteltrace.WithNewRoot())
//	trace.Inject(ctx, batch.GetMeta()) // before batch is sent
package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mgrpo/mgrpo/actors/internal/otlp"
	"github.com/mgrpo/mgrpo/messages"
)

// ScopeName is the instrumentation scope of every span mgrpo makes.
const ScopeName = "github.com/mgrpo/mgrpo"

// Options configure a node's tracing (config trace.* plus who the node is).
type Options struct {
	// ServiceName is the service.name of every span (trace.service_name).
	ServiceName string
	// InstanceID names the node (service.instance.id); Version its build.
	InstanceID, Version string
	// Roles are the node's roles (the mgrpo.roles resource attribute).
	Roles []string
	// OTLPEndpoint is host:port of an OTLP collector ("" for none) and
	// Protocol grpc or http.
	OTLPEndpoint, Protocol string
	// File receives every span as one JSON line ("" for none).
	File string
	// SampleRatio is the fraction of root spans (steps) sampled.
	SampleRatio float64
	// Warn receives one line when writing File first fails (a full disk,
	// a removed mount); the spans after it are dropped without a word.
	// nil discards the line.
	Warn io.Writer
}

// Provider is a node's tracer provider.
type Provider struct {
	sdk    *sdktrace.TracerProvider // nil when tracing is off
	tracer oteltrace.Tracer
	file   *os.File
}

// New returns the node's provider: exporting to the collector and/or the
// file of o, or a no-op one when o names neither.
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.OTLPEndpoint == "" && o.File == "" {
		return &Provider{tracer: noop.NewTracerProvider().Tracer(ScopeName)}, nil
	}
	res, err := otlp.Resource(ctx, o.ServiceName, o.InstanceID, o.Version, o.Roles)
	if err != nil {
		return nil, fmt.Errorf("trace: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio)))}
	p := &Provider{}
	if o.OTLPEndpoint != "" {
		exp, err := otlp.Exporter(ctx, "trace.otlp_endpoint", o.OTLPEndpoint, otlp.For(o.Protocol).Spans)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)))
	}
	if o.File != "" {
		f, err := os.OpenFile(o.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("trace.file: %w", err)
		}
		exp, err := stdouttrace.New(stdouttrace.WithWriter(&sink{w: f, name: o.File, warn: o.Warn}))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("trace.file: %w", err)
		}
		p.file = f
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)))
	}
	p.sdk = sdktrace.NewTracerProvider(opts...)
	p.tracer = p.sdk.Tracer(ScopeName)
	return p, nil
}

// sink is trace.file's writer. The exporter reports every span it fails
// to write, so a full disk would print a line per span for the rest of a
// run: sink says so once, on warn, and drops what comes after. Tracing
// never stops a run.
type sink struct {
	w    io.Writer
	name string
	warn io.Writer

	mu     sync.Mutex
	failed bool
}

// Write writes b, or drops it once a write has failed; it never fails.
func (s *sink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return len(b), nil
	}
	if _, err := s.w.Write(b); err != nil {
		s.failed = true
		if s.warn != nil {
			fmt.Fprintf(s.warn, "warning: trace.file %q: %v; the spans after it are not written\n", s.name, unwrapPath(err))
		}
	}
	return len(b), nil
}

// unwrapPath is err without the *os.PathError's repeat of the file's
// name, which the warning already says.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// File is the path of the file the spans are written to, "" for none.
func (p *Provider) File() string {
	if p.file == nil {
		return ""
	}
	return p.file.Name()
}

// Tracer is the node's tracer.
func (p *Provider) Tracer() oteltrace.Tracer { return p.tracer }

// Shutdown exports the spans still queued (waiting at most until ctx
// ends) and closes the exporters.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := p.sdk.Shutdown(ctx)
	if p.file != nil {
		if cerr := p.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// propagator reads and writes W3C traceparent and tracestate.
var propagator = propagation.TraceContext{}

// Inject writes the span context of ctx into meta.Trace. meta must belong
// to a message not yet sent.
func Inject(ctx context.Context, meta *messages.StepMeta) {
	if meta == nil || !oteltrace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if meta.Trace == nil {
		meta.Trace = map[string]string{}
	}
	propagator.Inject(ctx, propagation.MapCarrier(meta.Trace))
}

// Extract returns a context holding the span context meta carries (a
// remote parent), or ctx unchanged when it carries none.
func Extract(ctx context.Context, meta *messages.StepMeta) context.Context {
	if len(meta.GetTrace()) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(meta.GetTrace()))
}

// WithSpan returns a copy of meta carrying the span context of ctx: the
// header for a new message derived from one already sent.
func WithSpan(ctx context.Context, meta *messages.StepMeta) *messages.StepMeta {
	m := messages.DeriveMeta(meta)
	Inject(ctx, m)
	return m
}

// TraceID is the hexadecimal trace id of ctx's span when it is sampled,
// "" otherwise: what a metrics line records to lead to its trace.
func TraceID(ctx context.Context) string {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
