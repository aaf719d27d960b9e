package runlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// File and directory names inside a run directory (DESIGN §5).
const (
	MetricsFile    = "metrics.jsonl"
	ConfigFile     = "config.yaml"
	ReportFile     = "report.html"
	WarmStartFile  = "warm_start.jsonl"
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
	warm     *os.File // warm_start.jsonl, opened by the first WriteWarmStart
	warmStep int      // step of the last warm_start.jsonl line
	created  bool     // Create made the directory (see Created)
}

// Create makes the run directory root/name for a new run, with its
// samples/ and checkpoints/ sub-directories and an empty metrics.jsonl. A
// directory of that name may already exist only if it is empty or a dead
// start — a run stopped (killed, or interrupted twice) before it wrote a
// metrics line or a checkpoint, holding at most config.yaml, the warm
// start's log, an empty metrics.jsonl and empty samples/ and checkpoints/
// — whose contents are
// cleared. Anything else is ErrRunExists: continue such a run with Open and
// Resume. Every Dir holds an exclusive lock on its metrics.jsonl until
// Close, and Create takes it before clearing anything, so a directory a
// running process has open is ErrInUse, and of two runs creating one name
// at once exactly one gets it.
func Create(root, name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(root, name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create run %s: %w", path, err)
	}
	created := true
	if err := os.Mkdir(path, 0o755); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create run %s: %w", path, err)
		}
		created = false
		if err := checkDeadStart(path); err != nil { // before open adds a metrics.jsonl
			return nil, fmt.Errorf("create run %s: %w", path, err)
		}
	}
	d, err := open(path) // the lock: from here on no other process clears or claims it
	if err != nil {
		return nil, err
	}
	if err := d.claim(created); err != nil {
		d.Close()
		return nil, fmt.Errorf("create run %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(root); err != nil {
		d.Close()
		return nil, fmt.Errorf("create run %s: %w", path, err)
	}
	return d, nil
}

// claim makes a locked directory a fresh run: a dead start that existed is
// checked again under the lock and cleared (all but the locked, empty
// metrics.jsonl), then the sub-directories are made.
func (d *Dir) claim(created bool) error {
	d.created = created
	if !created {
		if err := checkDeadStart(d.path); err != nil {
			return err
		}
		entries, err := os.ReadDir(d.path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Name() == MetricsFile {
				continue
			}
			if err := os.RemoveAll(filepath.Join(d.path, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, sub := range []string{SamplesDir, CheckpointsDir} {
		if err := os.MkdirAll(filepath.Join(d.path, sub), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// checkDeadStart returns ErrRunExists unless the directory at path is
// empty or a dead start (see Create).
func checkDeadStart(path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !deadStartEntry(path, e) {
			return fmt.Errorf("%w (it holds %s)", ErrRunExists, e.Name())
		}
	}
	return nil
}

// deadStartEntry reports whether e may be in a run directory that never
// got to its first metrics line or checkpoint.
func deadStartEntry(path string, e fs.DirEntry) bool {
	full := filepath.Join(path, e.Name())
	switch e.Name() {
	case ConfigFile, WarmStartFile:
		return e.Type().IsRegular()
	case MetricsFile:
		info, err := e.Info()
		return err == nil && e.Type().IsRegular() && info.Size() == 0
	case SamplesDir, CheckpointsDir:
		sub, err := os.ReadDir(full)
		return err == nil && e.IsDir() && len(sub) == 0
	}
	return false
}

// Created reports whether Create made the directory itself, rather than
// taking over an empty directory or a dead start that already existed.
func (d *Dir) Created() bool { return d.created }

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
	if err := lockFile(f); err != nil { // held until Close: one process per run
		f.Close()
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

// LastStep is the step of the last metrics line written, or -1 if none.
func (d *Dir) LastStep() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastStep
}

// WriteConfig stores the effective configuration text as config.yaml,
// atomically.
func (d *Dir) WriteConfig(text []byte) error {
	return atomicfile.WriteBytes(filepath.Join(d.path, ConfigFile), text)
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
	if d.warm != nil {
		err, d.warm = d.warm.Close(), nil
		if err != nil {
			return fmt.Errorf("close %s: %w", filepath.Join(d.path, WarmStartFile), err)
		}
	}
	return nil
}
