package otlp

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestExportErrors: a failing exporter's errors are one line at first,
// then at most one a minute, saying how many were not written; an
// exporter answered 404 by a port that speaks HTTP printed a line per
// batch, 170 in 20 s.
func TestExportErrors(t *testing.T) {
	var out bytes.Buffer
	e := NewExportErrors(&out)
	start := time.Date(2026, 11, 29, 0, 10, 0, 0, time.UTC)
	now := start
	e.now = func() time.Time { return now }
	for _, step := range []struct {
		after time.Duration // since start
		n     int           // errors
	}{{0, 1}, {time.Second, 100}, {59 * time.Second, 5}, {61 * time.Second, 1}, {62 * time.Second, 3}, {3 * time.Minute, 1}} {
		now = start.Add(step.after)
		for range step.n {
			e.Handle(errors.New("traces export: rpc error:\ncode = Unimplemented"))
		}
	}
	e.Handle(nil)
	want := []string{
		"warning: telemetry: traces export: rpc error: code = Unimplemented",
		"warning: telemetry: traces export: rpc error: code = Unimplemented (and 105 more such errors since 00:10:00)",
		"warning: telemetry: traces export: rpc error: code = Unimplemented (and 3 more such errors since 00:11:01)",
	}
	if got := strings.TrimSuffix(out.String(), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("wrote:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}
