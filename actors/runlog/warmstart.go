package runlog

import (
	"fmt"
	"os"
	"path/filepath"
)

// Keys of warm_start.jsonl lines besides the step and
// KeyEvalGreedyAccuracy (written on the steps that measured it).
const (
	// KeyWarmStartLoss is the supervised loss of the warm-start step.
	KeyWarmStartLoss = "warm_start/loss"
	// KeyWarmStartElapsed is the wall time since the warm start began, in
	// seconds.
	KeyWarmStartElapsed = "warm_start/elapsed_s"
)

// WriteWarmStart appends one line for warm-start step to warm_start.jsonl
// (created by the first call), in the metrics.jsonl format, so that the
// run's page can draw the warm start and RL on one axis. Steps must
// increase from call to call.
func (d *Dir) WriteWarmStart(step int, m map[string]float64) error {
	line, err := encodeLine(step, m, "")
	if err != nil {
		return fmt.Errorf("write warm start step %d: %w", step, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics.f == nil {
		return fmt.Errorf("write warm start step %d: %w", step, ErrClosed)
	}
	if d.warm.f == nil {
		path := filepath.Join(d.path, WarmStartFile)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("write warm start step %d: %w", step, err)
		}
		d.warm = lineLog{f: f, last: -1, page: newPageLog()}
	}
	if err := d.warm.append(Record{Step: step, Values: m}, line); err != nil {
		return fmt.Errorf("write warm start: %w", err)
	}
	return nil
}
