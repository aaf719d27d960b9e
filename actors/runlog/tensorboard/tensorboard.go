// Package tensorboard writes TensorBoard event files: scalar summaries of
// a run's metrics, one event per step, that TensorBoard (and anything that
// reads its format) shows beside metrics.jsonl.
//
// An event file is a sequence of records, each
//
//	uint64 length (little endian), uint32 masked CRC-32C of the length,
//	length bytes of data, uint32 masked CRC-32C of the data
//
// where the mask is ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2^32, and
// each record's data is a tensorflow.Event protocol buffer: wall_time
// (field 1, double), step (2, int64), file_version (3, string, the first
// event: "brain.Event:2") or summary (5, a Summary message of repeated
// value (1) messages with tag (1, string) and simple_value (2, float)).
// The encoding is written with protowire from those field numbers: no
// generated code.
//
// Example:
//
//	w, err := tensorboard.Create("runs/NAME/tensorboard")
//	err = w.WriteScalars(12, time.Now(), map[string]float64{"train/reward": 0.5})
//	err = w.Close()
package tensorboard

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// FilePrefix starts the name of every event file; TensorBoard reads the
// files of a directory whose names contain "tfevents".
const FilePrefix = "events.out.tfevents."

// fileVersion is the first event's file_version.
const fileVersion = "brain.Event:2"

// Field numbers of tensorflow.Event, Summary and Summary.Value.
const (
	eventWallTime    = 1
	eventStep        = 2
	eventFileVersion = 3
	eventSummary     = 5
	summaryValue     = 1
	valueTag         = 1
	valueSimple      = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer appends events to one event file. It is not safe for concurrent
// use.
type Writer struct {
	f    *os.File
	buf  *bufio.Writer
	path string
}

// Create makes dir (if needed) and a new event file in it, named
// events.out.tfevents.<unix seconds>.<host>.<pid> (with a ".N" suffix for
// a later file of the same process and second) so that a resumed run adds
// a file instead of overwriting one, and writes the file_version event.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	now := time.Now()
	base := filepath.Join(dir, fmt.Sprintf("%s%d.%s.%d", FilePrefix, now.Unix(), host, os.Getpid()))
	path := base
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	for n := 2; errors.Is(err, fs.ErrExist) && n <= 100; n++ { // a second file of this process within one second
		path = fmt.Sprintf("%s.%d", base, n)
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f, buf: bufio.NewWriter(f), path: path}
	ev := protowire.AppendTag(nil, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(seconds(now)))
	ev = protowire.AppendTag(ev, eventFileVersion, protowire.BytesType)
	ev = protowire.AppendString(ev, fileVersion)
	if err := w.writeRecord(ev); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// WriteScalars appends one event at step holding a scalar summary for
// every key of values (tags in sorted order; TensorBoard groups tags by
// the part before their first "/"). The values are stored as float32, as
// TensorBoard's simple_value is.
func (w *Writer) WriteScalars(step int64, at time.Time, values map[string]float64) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var summary []byte
	for _, k := range keys {
		var v []byte
		v = protowire.AppendTag(v, valueTag, protowire.BytesType)
		v = protowire.AppendString(v, k)
		v = protowire.AppendTag(v, valueSimple, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(values[k])))
		summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
		summary = protowire.AppendBytes(summary, v)
	}
	ev := protowire.AppendTag(nil, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(seconds(at)))
	ev = protowire.AppendTag(ev, eventStep, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, eventSummary, protowire.BytesType)
	ev = protowire.AppendBytes(ev, summary)
	return w.writeRecord(ev)
}

// Flush writes buffered events to the file, so that TensorBoard sees them.
func (w *Writer) Flush() error {
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("tensorboard %s: %w", w.path, err)
	}
	return nil
}

// Close flushes, syncs and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if serr := w.f.Sync(); err == nil && serr != nil {
		err = fmt.Errorf("tensorboard %s: %w", w.path, serr)
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard %s: %w", w.path, cerr)
	}
	return err
}

// writeRecord frames data as a record.
func (w *Writer) writeRecord(data []byte) error {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], maskedCRC(data))
	for _, b := range [][]byte{head[:], data, tail[:]} {
		if _, err := w.buf.Write(b); err != nil {
			return fmt.Errorf("tensorboard %s: %w", w.path, err)
		}
	}
	return nil
}

// maskedCRC is TFRecord's masked CRC-32C.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// seconds is t as fractional Unix seconds.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
