package otlp

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ExportErrors is the OpenTelemetry error handler of a node
// (otel.SetErrorHandler): an exporter that fails (a collector that is
// down, a port that speaks another protocol) reports every batch it
// loses, which the default handler logs at once, a line each, hundreds a
// minute. ExportErrors writes the first as one line and then at most one
// a minute, saying how many it did not write.
type ExportErrors struct {
	out   io.Writer
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	last    time.Time // when a line was last written
	skipped int       // errors since then not written
}

// NewExportErrors returns the handler writing to out.
func NewExportErrors(out io.Writer) *ExportErrors {
	return &ExportErrors{out: out, every: time.Minute, now: time.Now}
}

// Handle implements otel.ErrorHandler.
func (e *ExportErrors) Handle(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	now := e.now()
	if !e.last.IsZero() && now.Sub(e.last) < e.every {
		e.skipped++
		e.mu.Unlock()
		return
	}
	more := ""
	if e.skipped > 0 {
		more = fmt.Sprintf(" (and %d more such errors since %s)", e.skipped, e.last.Format(time.TimeOnly))
	}
	e.last, e.skipped = now, 0
	e.mu.Unlock()
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(e.out, "warning: telemetry: %s%s\n", msg, more)
}
