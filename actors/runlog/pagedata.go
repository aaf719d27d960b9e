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
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxPageSamples is how many sample tables a page embeds at most: evenly
// spaced over the run, the newest always among them.
const maxPageSamples = 120

// pageRun is one run as its page shows it: the files of its directory as
// they were when read, and how many bytes of each log were read (the
// complete lines), from where a live page goes on reading.
type pageRun struct {
	name       string
	config     map[string]any // config.yaml; nil when absent
	metrics    []Record
	metricsOff int64
	warm       []Record // warm_start.jsonl
	warmOff    int64
	samples    []pageSamples
}

// pageSamples is one sample table: its step and its file's JSON.
type pageSamples struct {
	step  int
	table json.RawMessage
}

// loadRun reads the run directory dir for its page.
func loadRun(dir string) (*pageRun, error) {
	r := &pageRun{name: filepath.Base(filepath.Clean(dir))}
	var err error
	if r.metrics, r.metricsOff, err = readLog(filepath.Join(dir, MetricsFile), 0); err != nil {
		return nil, err
	}
	if r.warm, r.warmOff, err = readLog(filepath.Join(dir, WarmStartFile), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if r.config, err = readConfig(filepath.Join(dir, ConfigFile)); err != nil {
		return nil, err
	}
	steps, err := sampleSteps(dir, -1)
	if err != nil {
		return nil, err
	}
	if r.samples, err = readSamples(dir, thinSteps(steps, maxPageSamples)); err != nil {
		return nil, err
	}
	return r, nil
}

// readLog reads the complete lines of a metrics.jsonl-format file from
// byte offset off and returns them with the offset after the last one.
func readLog(path string, off int64) ([]Record, int64, error) {
	data, err := readFrom(path, off)
	if err != nil {
		return nil, off, fmt.Errorf("read %s: %w", path, err)
	}
	var recs []Record
	for n, line := range completeLines(data) {
		r, err := DecodeMetrics(line)
		if err != nil {
			return nil, off, fmt.Errorf("read %s line %d: %w", path, n+1, err)
		}
		recs = append(recs, r)
	}
	return recs, off + int64(bytes.LastIndexByte(data, '\n')+1), nil
}

// readFrom reads path from byte offset off to its end.
func readFrom(path string, off int64) ([]byte, error) {
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
	buf := make([]byte, st.Size()-off)
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

// exactKey reports whether the page carries key's values at full
// precision: those its headline shows (so that it equals metrics.jsonl)
// and the guard levels. Every other value gets 6 significant digits,
// plenty for a curve, and less than half the bytes.
func exactKey(key string) bool {
	return strings.HasPrefix(key, "eval/") || strings.HasPrefix(key, "guard/") || strings.HasPrefix(key, "warm_start/") ||
		key == KeyStepTime || key == KeyTokensPerSec || key == "train/skipped"
}

// appendLog appends recs as the JSON object
//
//	{"steps":[...],"cols":{"<key>":[v,...] or v,...},"trace":{"<step>":"<id>",...}}
//
// with one value per step in each column (null where a line lacks the key
// or its value is null), a single number for a column that holds it on
// every step, and the trace ids of the traced steps.
func appendLog(b *bytes.Buffer, recs []Record) {
	b.WriteString(`{"steps":[`)
	keys := map[string]bool{}
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.Step))
		for k := range r.Values {
			keys[k] = true
		}
	}
	b.WriteString(`],"cols":{`)
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for i, k := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		appendJSON(b, k)
		b.WriteByte(':')
		appendColumn(b, recs, k)
	}
	b.WriteString(`},"trace":{`)
	first := true
	for _, r := range recs {
		if r.TraceID == "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		appendJSON(b, strconv.Itoa(r.Step))
		b.WriteByte(':')
		appendJSON(b, r.TraceID)
	}
	b.WriteString("}}")
}

// appendColumn appends key's values over recs (see appendLog).
func appendColumn(b *bytes.Buffer, recs []Record, key string) {
	prec := 6
	if exactKey(key) {
		prec = -1
	}
	if v, ok := constant(recs, key); ok {
		b.Write(strconv.AppendFloat(nil, v, 'g', prec, 64))
		return
	}
	var num [32]byte
	b.WriteByte('[')
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		v, ok := r.Values[key]
		if !ok || !isFinite(v) {
			b.WriteString("null")
			continue
		}
		b.Write(strconv.AppendFloat(num[:0], v, 'g', prec, 64))
	}
	b.WriteByte(']')
}

// constant returns key's value when every record holds the same finite
// one.
func constant(recs []Record, key string) (float64, bool) {
	if len(recs) < 2 {
		return 0, false
	}
	c, ok := recs[0].Values[key]
	if !ok || !isFinite(c) {
		return 0, false
	}
	for _, r := range recs[1:] {
		if v, ok := r.Values[key]; !ok || v != c {
			return 0, false
		}
	}
	return c, true
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
