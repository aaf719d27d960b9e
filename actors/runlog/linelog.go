package runlog

import (
	"fmt"
	"os"
)

// lineLog is one file of step lines in the metrics.jsonl format
// (metrics.jsonl, warm_start.jsonl): the file, opened O_APPEND, the step of
// its last line, and the bounded copy report.html draws.
type lineLog struct {
	f    *os.File // nil until opened, and after Close
	last int      // step of the last line, -1 when none
	page *pageLog
}

// append writes r's line, encoded by encodeLine, after the last one:
// steps must increase from call to call.
func (l *lineLog) append(r Record, line []byte) error {
	if r.Step <= l.last {
		return fmt.Errorf("step %d after step %d: %w", r.Step, l.last, ErrBadMetrics)
	}
	if _, err := l.f.Write(line); err != nil {
		return fmt.Errorf("step %d: %w", r.Step, err)
	}
	l.last = r.Step
	l.page.add(r, len(line))
	return nil
}

// close closes the file, if open.
func (l *lineLog) close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
