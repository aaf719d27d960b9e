package runlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// File and directory names inside a run directory (DESIGN §5).
const (
	MetricsFile    = "metrics.jsonl"
	ConfigFile     = "config.yaml"
	ReportFile     = "report.html"
	SamplesDir     = "samples"
	CheckpointsDir = "checkpoints"
)

// Dir is one run directory, runs/<name>/, opened for writing. Its methods
// are safe for concurrent use.
type Dir struct {
	path string

	mu       sync.Mutex
	metrics  *os.File // opened O_APPEND; nil after Close
	lastStep int      // step of the last metrics line, -1 when none
}

// Create makes a new run directory root/name with its samples/ and
// checkpoints/ sub-directories and an empty metrics.jsonl. It refuses
// (ErrRunExists) a directory that exists and is not empty: continue such a
// run with Open and Resume.
func Create(root, name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(root, name)
	entries, err := os.ReadDir(path)
	switch {
	case err == nil && len(entries) > 0:
		return nil, fmt.Errorf("create run %s: %w", path, ErrRunExists)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("create run %s: %w", path, err)
	}
	for _, sub := range []string{SamplesDir, CheckpointsDir} {
		if err := os.MkdirAll(filepath.Join(path, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create run %s: %w", path, err)
		}
	}
	if err := syncDir(root); err != nil {
		return nil, fmt.Errorf("create run %s: %w", path, err)
	}
	return open(path)
}

// Open opens an existing run directory for appending, for example to
// resume it. A metrics line cut short by a crash, and anything after an
// unreadable line, is removed. Call Resume with the step of the checkpoint
// being resumed to drop the metrics and sample tables written after it.
func Open(path string) (*Dir, error) {
	if _, err := os.Stat(filepath.Join(path, MetricsFile)); err != nil {
		if _, err2 := os.Stat(filepath.Join(path, CheckpointsDir)); err2 != nil {
			return nil, fmt.Errorf("open run %s: %w", path, ErrNotRun)
		}
	}
	for _, sub := range []string{SamplesDir, CheckpointsDir} {
		if err := os.MkdirAll(filepath.Join(path, sub), 0o755); err != nil {
			return nil, fmt.Errorf("open run %s: %w", path, err)
		}
	}
	return open(path)
}

// open opens (creating if needed) metrics.jsonl under path and reads the
// last complete step from it.
func open(path string) (*Dir, error) {
	f, err := os.OpenFile(filepath.Join(path, MetricsFile), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	last, err := truncateMetrics(f, -1)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	return &Dir{path: path, metrics: f, lastStep: last}, nil
}

// checkName accepts a run name that is a single, ordinary path element.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("run name %q: %w", name, ErrBadName)
	}
	return nil
}

// Path is the run directory.
func (d *Dir) Path() string { return d.path }

// Name is the run's name, the last element of its path.
func (d *Dir) Name() string { return filepath.Base(d.path) }

// CheckpointsPath is the directory holding the run's checkpoints.
func (d *Dir) CheckpointsPath() string { return filepath.Join(d.path, CheckpointsDir) }

// MetricsPath is the run's metrics.jsonl.
func (d *Dir) MetricsPath() string { return filepath.Join(d.path, MetricsFile) }

// ReportPath is the run's report.html.
func (d *Dir) ReportPath() string { return filepath.Join(d.path, ReportFile) }

// LastStep is the step of the last metrics line written, or -1 if none.
func (d *Dir) LastStep() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastStep
}

// WriteConfig stores the effective configuration text as config.yaml,
// atomically.
func (d *Dir) WriteConfig(text []byte) error {
	return writeFileAtomic(filepath.Join(d.path, ConfigFile), text)
}

// Resume prepares the run to continue after step: metrics lines with a
// larger step and sample tables of later steps are removed, so the
// continued run writes no duplicate steps.
func (d *Dir) Resume(step int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics == nil {
		return ErrClosed
	}
	last, err := truncateMetrics(d.metrics, step)
	if err != nil {
		return fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	d.lastStep = last
	if err := removeSamplesAfter(filepath.Join(d.path, SamplesDir), step); err != nil {
		return fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	return nil
}

// Close closes metrics.jsonl. Further writes return ErrClosed.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics == nil {
		return nil
	}
	err := d.metrics.Close()
	d.metrics = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", d.MetricsPath(), err)
	}
	return nil
}
