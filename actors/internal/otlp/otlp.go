// Package otlp picks the OTLP exporter of a configured protocol, for the
// node's spans (actors/trace) and metrics (actors/meter) alike.
package otlp

import "fmt"

// Exporter builds the exporter of protocol: viaHTTP for "http", viaGRPC
// for anything else (gRPC is the default). key and endpoint name the
// setting in the error. The exporters connect lazily, so an unreachable
// collector costs dropped data, never a failed run.
func Exporter[E any](protocol, key, endpoint string, viaHTTP, viaGRPC func() (E, error)) (E, error) {
	build := viaGRPC
	if protocol == "http" {
		build = viaHTTP
	}
	exp, err := build()
	if err != nil {
		var none E
		return none, fmt.Errorf("%s %s: %w", key, endpoint, err)
	}
	return exp, nil
}
