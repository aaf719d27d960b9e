package config

import (
	"slices"
	"strings"
)

// WorkerKey reports whether a worker node (roles without the learner) uses
// its own value of key: its cluster section, where its models run
// (model.device, model.dtype), its own metrics and trace file
// (output.prometheus_port, output.pprof, output.otlp_metrics_endpoint,
// trace.service_name, trace.protocol, trace.file). A worker takes every
// other key from the configuration of the learner whose run it joins.
func WorkerKey(key string) bool {
	if strings.HasPrefix(key, "cluster.") {
		return true
	}
	return slices.Contains([]string{"model.device", "model.dtype", "output.prometheus_port", "output.pprof",
		"output.otlp_metrics_endpoint", "trace.service_name", "trace.protocol", "trace.file"}, key)
}

// SetKeys lists, sorted, the configuration keys src's file, environment
// and flags set.
func (src Sources) SetKeys() ([]string, error) {
	t := keys()
	_, set, err := layer(t, t.values(Default()), src)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(set))
	for k := range set {
		if _, ok := t.byKey[k]; ok { // not --config or --help
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
