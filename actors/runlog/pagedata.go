package runlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"go.yaml.in/yaml/v3"
)

// maxPageSamples is how many sample tables a page embeds at most: evenly
// spaced over the run, the newest always among them.
const maxPageSamples = 120

// pageRun is one run as its page shows it: the files of its directory as
// they were when read; its logs know how many bytes they hold (the
// complete lines), from where a live page goes on reading.
type pageRun struct {
	name    string
	config  map[string]any // config.yaml; nil when absent
	metrics *pageLog
	warm    *pageLog // warm_start.jsonl
	samples []pageSamples
}

// pageSamples is one sample table: its step and its file's JSON.
type pageSamples struct {
	step  int
	table json.RawMessage
}

// loadRun reads the run directory dir for its page.
func loadRun(dir string) (*pageRun, error) {
	f, err := os.Open(filepath.Join(dir, MetricsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &pageRun{name: filepath.Base(filepath.Clean(dir))}
	if r.metrics, err = scanPageLog(f); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if r.warm, err = readPageLog(filepath.Join(dir, WarmStartFile)); err != nil {
		return nil, err
	}
	if err := r.readFiles(dir); err != nil {
		return nil, err
	}
	return r, nil
}

// readFiles reads the run's config.yaml and sample tables.
func (r *pageRun) readFiles(dir string) error {
	var err error
	if r.config, err = readConfig(filepath.Join(dir, ConfigFile)); err != nil {
		return err
	}
	steps, err := sampleSteps(dir, -1)
	if err != nil {
		return err
	}
	r.samples, err = readSamples(dir, thinSteps(steps, maxPageSamples))
	return err
}

// readFrom reads path from byte offset off to its end, at most limit
// bytes of it.
func readFrom(path string, off, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off > st.Size() {
		return nil, fmt.Errorf("offset %d past the end (%d bytes): %w", off, st.Size(), errShrunk)
	}
	buf := make([]byte, min(st.Size()-off, limit))
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// errShrunk reports a log that is shorter than a reader had already read
// (a resume cut it): the reader starts again from the beginning.
var errShrunk = errors.New("the file shrank")

// readConfig reads config.yaml as a tree of maps (nil when absent).
func readConfig(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return cfg, nil
}

// sampleSteps lists the steps after step `after` that have a sample table,
// in increasing order.
func sampleSteps(dir string, after int) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(dir, SamplesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list samples: %w", err)
	}
	var steps []int
	for _, e := range entries {
		if s, ok := parseSamplesName(e.Name()); ok && s > after {
			steps = append(steps, s)
		}
	}
	sort.Ints(steps)
	return steps, nil
}

// thinSteps keeps at most limit of steps, evenly spaced, the last always.
func thinSteps(steps []int, limit int) []int {
	if len(steps) <= limit {
		return steps
	}
	out := make([]int, 0, limit)
	for i := range limit {
		out = append(out, steps[(len(steps)-1)-(limit-1-i)*(len(steps)-1)/(limit-1)])
	}
	return out
}

// readSamples reads the sample tables of steps; one that is not valid
// JSON is an error.
func readSamples(dir string, steps []int) ([]pageSamples, error) {
	out := make([]pageSamples, 0, len(steps))
	for _, s := range steps {
		path := filepath.Join(dir, SamplesDir, SamplesFileName(s))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read samples: %w", err)
		}
		if !json.Valid(data) {
			return nil, fmt.Errorf("read samples %s: %w", path, ErrBadTable)
		}
		out = append(out, pageSamples{step: s, table: data})
	}
	return out, nil
}

// appendJSON appends v as JSON with <, > and & escaped, so that the text
// can sit inside a <script> element.
func appendJSON(b *bytes.Buffer, v any) {
	data, err := json.Marshal(v)
	if err != nil { // only strings, string maps and raw JSON reach here
		data = []byte("null")
	}
	b.Write(data)
}
