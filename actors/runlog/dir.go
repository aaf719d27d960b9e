package runlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog/tensorboard"
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
	// ReferenceDir holds the run's frozen reference model (the warm
	// start), sealed like a checkpoint.
	ReferenceDir   = "reference"
	TensorBoardDir = "tensorboard"
)

// Dir is one run directory, runs/<name>/, opened for writing. Its methods
// are safe for concurrent use.
type Dir struct {
	path string

	mu      sync.Mutex
	metrics lineLog // metrics.jsonl; its file is nil after Close
	warm    lineLog // warm_start.jsonl, its file opened by the first WriteWarmStart
	created bool    // Create made the directory (see Created)

	tensorboard bool                // metrics lines are also TensorBoard events (WriteTensorBoard)
	events      *tensorboard.Writer // this process's event file, from the first line on; nil before
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
// resume it. A metrics line cut short by a crash is removed; nothing else
// is. Call Resume with the step of the checkpoint being resumed to drop the
// metrics and sample tables written after it.
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

// open opens (creating if needed) metrics.jsonl under path, finishes a
// rewrite that a crash interrupted (see resumeMetrics), cuts a last line a
// crash left without its newline, and reads the last step from it.
func open(path string) (*Dir, error) {
	f, err := os.OpenFile(filepath.Join(path, MetricsFile), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	if err := lockFile(f); err != nil { // held until Close: one process per run
		f.Close()
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	last, err := openMetrics(path, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	page, err := scanPageLog(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	warm, err := readPageLog(filepath.Join(path, WarmStartFile))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open run %s: %w", path, err)
	}
	return &Dir{path: path, metrics: lineLog{f: f, last: last, page: page}, warm: lineLog{last: -1, page: warm}}, nil
}

// openMetrics recovers a journal, cuts an unterminated last line and
// returns the step of the last readable line in order (-1 when none).
func openMetrics(path string, f *os.File) (int, error) {
	if err := recoverJournal(path, f); err != nil {
		return -1, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return -1, err
	}
	var end int64
	last, _, _, err := scanMetrics(f, -1, func(line []byte, _ fate) error {
		end += int64(len(line))
		return nil
	})
	if err != nil {
		return -1, err
	}
	return last, cutTo(f, end)
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
	return d.metrics.last
}

// WriteConfig stores the effective configuration text as config.yaml,
// atomically.
func (d *Dir) WriteConfig(text []byte) error {
	return atomicfile.WriteBytes(filepath.Join(d.path, ConfigFile), text)
}

// Resume prepares the run to continue after step: metrics lines with a
// larger step, sample tables of later steps and a final evaluation of a
// later step (final_eval.json) are removed, so the continued run writes no
// duplicate steps and no stale result. A metrics line that cannot be
// read, or is out of step order, is moved to metrics.jsonl.unreadable
// (MetricsAsideFile) and every readable line around it is kept; Resume
// returns how many lines it moved.
func (d *Dir) Resume(step int) (aside int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics.f == nil {
		return 0, ErrClosed
	}
	last, aside, err := resumeMetrics(d.path, d.metrics.f, step)
	if err != nil {
		return 0, fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	if d.metrics.page, err = scanPageLog(d.metrics.f); err != nil {
		return 0, fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	d.metrics.last = last
	if err := removeSamplesAfter(filepath.Join(d.path, SamplesDir), step); err != nil {
		return aside, fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	if err := tensorboard.Prune(d.TensorBoardPath(), int64(step)); err != nil {
		return aside, fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	if err := dropFinalEvalAfter(d.path, step); err != nil {
		return aside, fmt.Errorf("resume %s at step %d: %w", d.path, step, err)
	}
	return aside, nil
}

// TensorBoardPath is the directory of the run's TensorBoard event files.
func (d *Dir) TensorBoardPath() string { return filepath.Join(d.path, TensorBoardDir) }

// WriteTensorBoard makes every later metrics line also a TensorBoard
// event: the same step, keys and values (as float32; the trace id is no
// number and is left out), in a new event file under tensorboard/ that
// the first such line creates and every line flushes. Each process that
// writes the run (a resume) adds its own file; Resume cuts the events of
// later steps from the earlier ones, as it cuts metrics.jsonl.
func (d *Dir) WriteTensorBoard() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tensorboard = true
}

// writeEvent writes step's metrics as a TensorBoard event when that is
// on. d.mu is held.
func (d *Dir) writeEvent(step int, m map[string]float64) error {
	if !d.tensorboard {
		return nil
	}
	if d.events == nil {
		w, err := tensorboard.Create(d.TensorBoardPath())
		if err != nil {
			return err
		}
		d.events = w
	}
	if err := d.events.WriteScalars(int64(step), time.Now(), m); err != nil {
		return err
	}
	return d.events.Flush()
}

// Close closes metrics.jsonl and the TensorBoard event file. Further
// writes return ErrClosed.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics.f == nil {
		return nil
	}
	err := d.metrics.close()
	if err != nil {
		err = fmt.Errorf("close %s: %w", d.MetricsPath(), err)
	}
	if cerr := d.warm.close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", filepath.Join(d.path, WarmStartFile), cerr)
	}
	if d.events != nil {
		if cerr := d.events.Close(); err == nil {
			err = cerr
		}
		d.events = nil
	}
	return err
}
