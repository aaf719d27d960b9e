package runlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
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
// the operating system before returning (and the same values to the
// TensorBoard event file, after WriteTensorBoard). Steps must increase
// from call to call. The key "step" is reserved.
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
	if d.metrics.f == nil {
		return fmt.Errorf("write metrics step %d: %w", step, ErrClosed)
	}
	if err := d.metrics.append(Record{Step: step, Values: m, TraceID: traceID}, line); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	if err := d.writeEvent(step, m); err != nil {
		return fmt.Errorf("write metrics step %d: %w", step, err)
	}
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

// Files a resume writes next to metrics.jsonl: the lines it could not
// read (kept aside, never deleted), and the journal of a rewrite.
const (
	MetricsAsideFile   = MetricsFile + ".unreadable"
	metricsJournalFile = "." + MetricsFile + ".rewrite"
)

// fate is what a resume does with one metrics line.
type fate int

const (
	keepLine  fate = iota // a readable line of a step not after the resumed one
	dropLine              // a readable line of a later step: the resumed run writes it again
	asideLine             // unreadable, or out of step order: kept aside
)

// scanMetrics calls visit with every newline-terminated line of r (newline
// included) and its fate when resuming after step (after < 0: no limit).
// It returns the step of the last kept line (-1 when none), the bytes up
// to the end of the last line that is kept with every line before it
// (when nothing else is kept or set aside, the file can be cut there) and
// whether anything else is kept or set aside. An unterminated last piece,
// a write cut short, is not visited.
func scanMetrics(r io.Reader, after int, visit func(line []byte, f fate) error) (last int, prefix int64, scattered bool, err error) {
	br := bufio.NewReader(r)
	last = -1
	inPrefix := true
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return last, prefix, scattered, nil
		}
		if err != nil {
			return -1, 0, false, err
		}
		off += int64(len(line))
		f := keepLine
		rec, derr := DecodeMetrics(line)
		switch {
		case derr != nil || rec.Step <= last:
			f = asideLine
		case after >= 0 && rec.Step > after:
			f = dropLine
		}
		if f == keepLine {
			last = rec.Step
			if inPrefix {
				prefix = off
			} else {
				scattered = true
			}
		} else {
			scattered = scattered || f == asideLine
			inPrefix = false
		}
		if visit != nil {
			if err := visit(line, f); err != nil {
				return -1, 0, false, err
			}
		}
	}
}

// cutTo truncates f to size when it is longer, fsyncs it, and leaves the
// offset at the end.
func cutTo(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != size {
		if err := f.Truncate(size); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	_, err = f.Seek(0, io.SeekEnd)
	return err
}

// resumeMetrics prepares the metrics file f of the run at dir to continue
// after step: lines of later steps are dropped, and lines that cannot be
// read (or break the step order) are appended to metrics.jsonl.unreadable
// rather than deleted, with every readable line around them kept. It
// returns the step of the last kept line and how many lines went aside.
// When something is set aside the file is rewritten through a journal
// (recoverJournal finishes a rewrite a crash interrupted).
func resumeMetrics(dir string, f *os.File, after int) (last, aside int, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return -1, 0, err
	}
	last, prefix, scattered, err := scanMetrics(f, after, nil)
	if err != nil {
		return -1, 0, err
	}
	if !scattered {
		return last, 0, cutTo(f, prefix)
	}
	var kept, bad bytes.Buffer
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return -1, 0, err
	}
	if _, _, _, err := scanMetrics(f, after, func(line []byte, fl fate) error {
		switch fl {
		case keepLine:
			kept.Write(line)
		case asideLine:
			bad.Write(line)
			aside++
		}
		return nil
	}); err != nil {
		return -1, 0, err
	}
	if err := appendSynced(filepath.Join(dir, MetricsAsideFile), bad.Bytes()); err != nil {
		return -1, 0, err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, metricsJournalFile), kept.Bytes()); err != nil {
		return -1, 0, err
	}
	if err := recoverJournal(dir, f); err != nil {
		return -1, 0, err
	}
	return last, aside, nil
}

// recoverJournal copies a rewrite journal, if there is one, over the
// metrics file f (in place: f holds the run's lock) and removes it.
func recoverJournal(dir string, f *os.File) error {
	journal := filepath.Join(dir, metricsJournalFile)
	data, err := os.ReadFile(journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil { // O_APPEND: writes at the (new) end
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := os.Remove(journal); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

// appendSynced appends data to the file at path (created if needed) and
// fsyncs it; nothing is done for empty data.
func appendSynced(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncMetrics fsyncs metrics.jsonl.
func (d *Dir) syncMetrics() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics.f == nil {
		return ErrClosed
	}
	if err := d.metrics.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", d.MetricsPath(), err)
	}
	return nil
}
