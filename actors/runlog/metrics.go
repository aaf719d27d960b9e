package runlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
)

// StepKey is the key of the step number in every metrics.jsonl line.
const StepKey = "step"

// TraceIDKey is the key of a traced step's trace id (a string: readers
// of numbers skip it).
const TraceIDKey = "trace_id"

// Record is one metrics.jsonl line read back: the step and its values,
// with JSON null read as NaN, and the step's trace id ("" for none).
type Record struct {
	Step    int
	Values  map[string]float64
	TraceID string
}

// WriteMetrics appends one line for step to metrics.jsonl and hands it to
// the operating system before returning. Steps must increase from call to
// call. The key "step" is reserved.
func (d *Dir) WriteMetrics(step int, m map[string]float64) error {
	return d.WriteTracedMetrics(step, m, "")
}

// WriteTracedMetrics is WriteMetrics for a step whose trace has the id
// traceID ("" for none), written as TraceIDKey so that a person can go
// from a number to its trace.
func (d *Dir) WriteTracedMetrics(step int, m map[string]float64, traceID string) error {
	line, err := encodeLine(step, m, traceID)
	if err != nil {
		return fmt.Errorf("write metrics step %d: %w", step, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics == nil {
		return fmt.Errorf("write metrics step %d: %w", step, ErrClosed)
	}
	if step <= d.lastStep {
		return fmt.Errorf("write metrics step %d after step %d: %w", step, d.lastStep, ErrBadMetrics)
	}
	if _, err := d.metrics.Write(line); err != nil {
		return fmt.Errorf("write metrics step %d: %w", step, err)
	}
	d.lastStep = step
	return nil
}

// encodeLine returns the metrics.jsonl line for step, newline included:
//
//	{"step":N,"trace_id":"...","<key>":<value>,...}
//
// with the trace id only when traceID is not empty, the other keys in
// sorted order and NaN/±Inf written as null.
func encodeLine(step int, m map[string]float64, traceID string) ([]byte, error) {
	for _, k := range []string{StepKey, TraceIDKey} {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("key %q is reserved: %w", k, ErrBadMetrics)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString(`{"step":`)
	b.WriteString(strconv.Itoa(step))
	if traceID != "" {
		id, err := json.Marshal(traceID)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"` + TraceIDKey + `":`)
		b.Write(id)
	}
	for _, k := range keys {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		b.WriteByte(',')
		b.Write(kb)
		b.WriteByte(':')
		b.Write(encodeFloat(m[k]))
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// encodeFloat writes v as a JSON number, or null when v is not finite.
func encodeFloat(v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null")
	}
	b, _ := json.Marshal(v) // cannot fail for a finite float64
	return b
}

// DecodeMetrics parses one metrics.jsonl line. null values become NaN;
// the string under TraceIDKey becomes the Record's TraceID; other values
// that are not numbers are ignored.
func DecodeMetrics(line []byte) (Record, error) {
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrBadMetrics, err)
	}
	sn, ok := raw[StepKey].(json.Number)
	if !ok {
		return Record{}, fmt.Errorf("no %q: %w", StepKey, ErrBadMetrics)
	}
	step, err := strconv.Atoi(sn.String())
	if err != nil {
		return Record{}, fmt.Errorf("step %q: %w", sn, ErrBadMetrics)
	}
	r := Record{Step: step, Values: make(map[string]float64, len(raw)-1)}
	for k, v := range raw {
		if k == StepKey {
			continue
		}
		switch v := v.(type) {
		case string:
			if k == TraceIDKey {
				r.TraceID = v
			}
		case nil:
			r.Values[k] = math.NaN()
		case json.Number:
			f, err := v.Float64()
			if err != nil {
				return Record{}, fmt.Errorf("key %q = %s: %w", k, v, ErrBadMetrics)
			}
			r.Values[k] = f
		}
	}
	return r, nil
}

// ReadMetrics reads every complete line of a metrics.jsonl file. A last
// line without its newline (a write cut short) is ignored.
func ReadMetrics(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read metrics %s: %w", path, err)
	}
	var recs []Record
	for n, line := range completeLines(data) {
		r, err := DecodeMetrics(line)
		if err != nil {
			return nil, fmt.Errorf("read metrics %s line %d: %w", path, n+1, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// completeLines splits data into newline-terminated lines (without the
// newline), dropping a trailing unterminated piece.
func completeLines(data []byte) [][]byte {
	var lines [][]byte
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return lines
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
}

// truncateMetrics cuts the metrics file f after the last complete,
// parseable line whose step is at most after (after < 0: no limit), fsyncs
// it, and returns that line's step (-1 when no line is kept).
func truncateMetrics(f *os.File, after int) (int, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return -1, err
	}
	r := bufio.NewReader(f)
	var keep int64
	last := -1
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // an unterminated last piece is dropped
		}
		if err != nil {
			return -1, err
		}
		rec, derr := DecodeMetrics(line)
		if derr != nil || rec.Step <= last || (after >= 0 && rec.Step > after) {
			break
		}
		keep += int64(len(line))
		last = rec.Step
	}
	st, err := f.Stat()
	if err != nil {
		return -1, err
	}
	if st.Size() != keep {
		if err := f.Truncate(keep); err != nil {
			return -1, err
		}
		if err := f.Sync(); err != nil {
			return -1, err
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return -1, err
	}
	return last, nil
}
