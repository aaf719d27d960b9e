// Package meter sets up OpenTelemetry metrics for one node and records
// mgrpo's own.
//
// A node's Provider exports its metrics to an OTLP collector
// (output.otlp_metrics_endpoint, over trace.protocol), serves them for
// Prometheus at http://<cluster.host>:<output.prometheus_port>/metrics,
// both, or neither: then it is off, its Instruments are nil (whose
// methods do nothing) and proto.actor's own metrics stay off too. The
// resource names the service (trace.service_name), the node
// (service.instance.id), the build (service.version) and the node's roles
// (mgrpo.roles), as trace's does for spans.
//
// Besides mgrpo's instruments (Instruments; docs/METRICS.md lists them)
// the endpoint carries proto.actor's actor metrics (protoactor_*: mailbox
// lengths, message durations, spawns, restarts, dead letters, futures)
// when the node's actor system is given MeterProvider, and the Prometheus
// endpoint the Go runtime's and the process's (go_*, process_*).
// proto.actor takes its meters from OpenTelemetry's global meter
// provider, so New makes a Provider that exports anything the global one
// and Shutdown undoes that: the one piece of global state, which the
// library forces. Two Providers in one process therefore share
// proto.actor's metrics (the last one made gets them).
//
// It imports OpenTelemetry, the Prometheus client, proto.actor's actor
// package and actors/internal/otlp (the node's resource and the exporters
// of a protocol, shared with actors/trace); nothing of actors.
//
//	p, err := meter.New(ctx, meter.Options{ServiceName: "mgrpo", InstanceID: id, Host: "127.0.0.1", PrometheusPort: 9464})
//	sys := actor.NewActorSystem(actor.WithMetricProviders(p.MeterProvider()))
//	p.Instruments().Step(12, false, map[string]float64{"train/reward": 0.5})
//	err = p.Shutdown(ctx)
package meter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/mgrpo/mgrpo/actors/internal/otlp"
	"github.com/mgrpo/mgrpo/internal/connlimit"
)

// scopeName is the instrumentation scope of mgrpo's own instruments.
const scopeName = "github.com/mgrpo/mgrpo"

// profilesPath is where Go's profiles are served (output.pprof).
const profilesPath = "/debug/pprof/"

// serveProfiles adds net/http/pprof's handlers to mux under profilesPath
// (the package registers them on http.DefaultServeMux, which no server
// here serves).
func serveProfiles(mux *http.ServeMux) {
	mux.HandleFunc(profilesPath, pprof.Index)
	mux.HandleFunc(profilesPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(profilesPath+"profile", pprof.Profile)
	mux.HandleFunc(profilesPath+"symbol", pprof.Symbol)
	mux.HandleFunc(profilesPath+"trace", pprof.Trace)
}

// metricsPath is the path of the Prometheus endpoint.
const metricsPath = "/metrics"

// ErrBind: the Prometheus port cannot be bound.
var ErrBind = errors.New("cannot bind")

// Options configure a node's metrics (config output.* and trace.* plus
// who the node is).
type Options struct {
	// ServiceName is the service.name of every metric.
	ServiceName string
	// InstanceID names the node (service.instance.id); Version its build.
	InstanceID, Version string
	// Roles are the node's roles (the mgrpo.roles resource attribute).
	Roles []string
	// Host and PrometheusPort are where the Prometheus endpoint listens
	// (cluster.host, output.prometheus_port); port 0 serves none.
	Host           string
	PrometheusPort int
	// Pprof also serves Go's profiles on the Prometheus port, under
	// /debug/pprof/ (output.pprof).
	Pprof bool
	// OTLPEndpoint is host:port of an OTLP collector ("" for none) and
	// Protocol grpc or http. Metrics are pushed every 60 s (the SDK's
	// default; OTEL_METRIC_EXPORT_INTERVAL, in milliseconds, changes it)
	// and once more on Shutdown.
	OTLPEndpoint, Protocol string
}

// Provider is a node's meter provider and its endpoints.
type Provider struct {
	sdk      *sdkmetric.MeterProvider // nil when off
	server   *http.Server             // the Prometheus endpoint (nil: none)
	addr     string
	profiles bool // Go's profiles are served beside the metrics
	inst     *Instruments
}

// New returns the node's provider: exporting over OTLP and/or serving
// Prometheus as o asks, or one that is off. A Prometheus port that cannot
// be bound is an ErrBind naming output.prometheus_port.
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.OTLPEndpoint == "" && o.PrometheusPort == 0 {
		return &Provider{}, nil
	}
	res, err := otlp.Resource(ctx, o.ServiceName, o.InstanceID, o.Version, o.Roles)
	if err != nil {
		return nil, fmt.Errorf("metrics: resource: %w", err)
	}
	p := &Provider{}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if o.PrometheusPort != 0 {
		reader, err := p.serve(o.Host, o.PrometheusPort, o.Pprof)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(reader))
	}
	if o.OTLPEndpoint != "" {
		exp, err := otlp.Exporter(ctx, "output.otlp_metrics_endpoint", o.OTLPEndpoint, otlp.For(o.Protocol).Metrics)
		if err != nil {
			p.closeServer()
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	p.sdk = sdkmetric.NewMeterProvider(opts...)
	otel.SetMeterProvider(p.sdk) // proto.actor's meters come from the global provider
	p.inst, err = newInstruments(p.sdk.Meter(scopeName))
	if err != nil {
		p.Shutdown(ctx)
		return nil, err
	}
	return p, nil
}

// serve starts the Prometheus endpoint on host:port with a registry of
// its own (the OTel exporter's, the Go runtime's and the process's
// collectors), and with profiles Go's profiles beside it, and returns the
// exporter's reader.
func (p *Provider) serve(host string, port int, profiles bool) (sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("output.prometheus_port %d: %w: %w", port, ErrBind, err)
	}
	mux := http.NewServeMux()
	mux.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if profiles {
		serveProfiles(mux)
		p.profiles = true
	}
	p.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	p.addr = lis.Addr().String()
	go p.server.Serve(connlimit.New(connlimit.Limits{PerHost: maxScrapeConnsPerHost, Total: maxScrapeConns}.Scaled(8)).Listener(lis, nil)) // ends with ErrServerClosed on Shutdown
	return exp, nil
}

// scrapeLimits bound the connections to the Prometheus endpoint: a few
// scrapers, and no client that holds idle connections until the node runs
// out of descriptors (those over the limits are closed as they come).
const (
	maxScrapeConnsPerHost = 16
	maxScrapeConns        = 64
)

// MeterProvider is the provider proto.actor's actor system takes
// (actor.WithMetricProviders), nil when metrics are off.
func (p *Provider) MeterProvider() metric.MeterProvider {
	if p.sdk == nil {
		return nil
	}
	return p.sdk
}

// PrometheusURL is the URL of the Prometheus endpoint, "" when there is
// none.
func (p *Provider) PrometheusURL() string {
	if p.server == nil {
		return ""
	}
	return "http://" + p.addr + metricsPath
}

// ProfilesURL is the URL of Go's profiles (the index of
// net/http/pprof), "" when they are not served.
func (p *Provider) ProfilesURL() string {
	if !p.profiles {
		return ""
	}
	return "http://" + p.addr + profilesPath
}

// Instruments are the node's instruments, nil when metrics are off.
func (p *Provider) Instruments() *Instruments { return p.inst }

// Shutdown stops the Prometheus endpoint, exports what OTLP has not sent
// yet (waiting at most until ctx ends, and 10 s) and gives the global
// meter provider back to a no-op one.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		p.closeServer()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := p.closeServer()
	if serr := p.sdk.Shutdown(ctx); err == nil {
		err = serr
	}
	if otel.GetMeterProvider() == metric.MeterProvider(p.sdk) {
		otel.SetMeterProvider(noop.NewMeterProvider())
	}
	return err
}

// closeServer closes the Prometheus endpoint, if any.
func (p *Provider) closeServer() error {
	if p.server == nil {
		return nil
	}
	return p.server.Close()
}
