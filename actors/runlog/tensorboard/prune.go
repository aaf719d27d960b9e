package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Prune prepares the event files in dir for a run resumed after step
// after: each file is cut before its first event of a later step, or
// before its first record that is cut short or fails its CRC (a write a
// crash interrupted), and a file left without a summary is removed, so
// that the files hold the steps metrics.jsonl keeps. Events within one
// file are in increasing step order, as a Writer of one run writes them.
// A missing dir is no error.
func Prune(dir string, after int64) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), FilePrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := pruneFile(path, after); err != nil {
			return fmt.Errorf("tensorboard: prune %s after step %d: %w", path, after, err)
		}
	}
	return nil
}

// pruneFile cuts one event file (see Prune).
func pruneFile(path string, after int64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	keep, summaries := 0, 0
	for keep < len(data) {
		body, n, ok := nextRecord(data[keep:])
		if !ok {
			break
		}
		step, summary, err := readEvent(body)
		if err != nil || (summary && step > after) {
			break
		}
		if summary {
			summaries++
		}
		keep += n
	}
	if summaries == 0 {
		return os.Remove(path)
	}
	if keep == len(data) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(keep))
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// nextRecord returns the data of the record at the start of b and the
// record's whole length; ok is false for a record cut short or with a
// wrong CRC.
func nextRecord(b []byte) (data []byte, n int, ok bool) {
	if len(b) < 16 || binary.LittleEndian.Uint32(b[8:12]) != maskedCRC(b[:8]) {
		return nil, 0, false
	}
	size := binary.LittleEndian.Uint64(b[:8])
	if size > uint64(len(b)-16) {
		return nil, 0, false
	}
	end := 12 + int(size)
	data = b[12:end]
	if binary.LittleEndian.Uint32(b[end:end+4]) != maskedCRC(data) {
		return nil, 0, false
	}
	return data, end + 4, true
}

// readEvent reads an Event's step and whether it holds a summary.
func readEvent(b []byte) (step int64, summary bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false, protowire.ParseError(n)
		}
		b = b[n:]
		if num == eventStep && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, false, protowire.ParseError(m)
			}
			step = int64(v)
		}
		summary = summary || num == eventSummary
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, false, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return step, summary, nil
}
