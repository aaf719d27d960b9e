package runlog

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// maxPageRows is how many metrics lines a page carries, besides those with
// an evaluation or a guard's alert: a run of up to this many steps has
// every line on its page; a longer run's is thinned to every 2nd, 4th, ...
// line and its last, as TensorBoard samples long series. A Dir keeps its
// run's page log in memory, so this bounds the memory however long the run
// (about 40 KB a key).
const maxPageRows = 4096

// pageLog is a metrics.jsonl-format log as the run page draws it: its
// lines in columns, thinned to at most maxPageRows ordinary lines, with
// the sum and count of every key's values over all lines, so that the
// headline's totals and means are exact however thin the columns.
type pageLog struct {
	steps  []int
	cols   map[string]*column    // one value per kept line, null where a line lacks the key
	trace  map[int]string        // trace ids of the kept lines, by step
	sticky []bool                // the kept line holds an evaluation or an alert: never thinned
	plain  int                   // kept lines that are not sticky
	sums   map[string][2]float64 // sum and count of each key's finite values, over every line

	stride int   // an ordinary line is kept when seen%stride == 0
	seen   int   // lines added
	tail   bool  // the last kept line is kept only because it is the newest
	off    int64 // bytes of the log's lines added
}

func newPageLog() *pageLog {
	return &pageLog{cols: map[string]*column{}, trace: map[int]string{}, sums: map[string][2]float64{}, stride: 1}
}

// readPageLog reads the complete lines of the log at path (none when the
// file does not exist) a line at a time; lines that cannot be read, or are
// out of step order, count for the offset only.
func readPageLog(path string) (*pageLog, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return newPageLog(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	l, err := scanPageLog(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return l, nil
}

// scanPageLog reads a page log from r, from its start.
func scanPageLog(r io.ReadSeeker) (*pageLog, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	l := newPageLog()
	_, _, _, err := scanMetrics(r, -1, func(line []byte, f fate) error {
		if f != keepLine {
			l.off += int64(len(line))
			return nil
		}
		rec, _ := DecodeMetrics(line) // keepLine: it decodes
		l.add(rec, len(line))
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, err = r.Seek(0, io.SeekEnd)
	return l, err
}

// add appends rec, a line of size bytes.
func (l *pageLog) add(rec Record, size int) {
	l.off += int64(size)
	for k, v := range rec.Values {
		if isFinite(v) {
			s := l.sums[k]
			l.sums[k] = [2]float64{s[0] + v, s[1] + 1}
		}
	}
	if l.tail {
		l.dropLast()
	}
	sticky := holdsEvent(rec.Values)
	keep := sticky || l.seen%l.stride == 0
	l.seen++
	n := len(l.steps)
	l.steps = append(l.steps, rec.Step)
	for k, c := range l.cols {
		v, ok := rec.Values[k]
		if !ok {
			v = math.NaN()
		}
		c.push(v)
	}
	for k, v := range rec.Values {
		if _, ok := l.cols[k]; !ok {
			c := &column{exact: exactKey(k)}
			for range n {
				c.push(math.NaN())
			}
			c.push(v)
			l.cols[k] = c
		}
	}
	if rec.TraceID != "" {
		l.trace[rec.Step] = rec.TraceID
	}
	l.sticky = append(l.sticky, sticky)
	if !sticky {
		l.plain++
	}
	l.tail = !keep
	if l.plain > maxPageRows {
		l.halve()
	}
}

// holdsEvent reports whether a line holds an evaluation or a guard's
// alert, which the page shows each of.
func holdsEvent(values map[string]float64) bool {
	for k, v := range values {
		if strings.HasPrefix(k, "eval/") && isFinite(v) || strings.HasPrefix(k, "guard/") && v >= 1 {
			return true
		}
	}
	return false
}

// dropLast removes the last kept line.
func (l *pageLog) dropLast() {
	n := len(l.steps) - 1
	delete(l.trace, l.steps[n])
	if !l.sticky[n] {
		l.plain--
	}
	l.steps, l.sticky = l.steps[:n], l.sticky[:n]
	for _, c := range l.cols {
		c.truncate(n)
	}
	l.tail = false
}

// halve drops every other ordinary line but the last, and doubles the
// stride.
func (l *pageLog) halve() {
	keep := make([]int, 0, len(l.steps))
	odd := false
	for i, s := range l.sticky {
		if !s {
			odd = !odd
			if !odd && i != len(l.steps)-1 {
				delete(l.trace, l.steps[i])
				l.plain--
				continue
			}
		}
		keep = append(keep, i)
	}
	for j, i := range keep {
		l.steps[j], l.sticky[j] = l.steps[i], l.sticky[i]
	}
	l.steps, l.sticky = l.steps[:len(keep)], l.sticky[:len(keep)]
	for _, c := range l.cols {
		c.keep(keep)
	}
	l.stride *= 2
}

// exactKey reports whether the page carries key's values at full
// precision: those its headline shows (so that it equals metrics.jsonl)
// and the guard levels. Every other value gets 6 significant digits,
// plenty for a curve, and less than half the bytes.
func exactKey(key string) bool {
	return strings.HasPrefix(key, "eval/") || strings.HasPrefix(key, "guard/") || strings.HasPrefix(key, "warm_start/") ||
		key == KeyStepTime || key == KeyTokensPerSec || key == "train/skipped"
}

// appendJSON appends l as the JSON object
//
//	{"steps":[...],"cols":{"<key>":[v,...] or v,...},"trace":{"<step>":"<id>",...},
//	 "sums":{"<key>":[sum,count],...}}
//
// with one value per kept line in each column (null where a line lacks
// the key or its value is null), a single number for a column that holds
// the same on every line, the trace ids of the kept lines, and the sum and
// count of each key's finite values over every line.
func (l *pageLog) appendJSON(b *bytes.Buffer) {
	b.WriteString(`{"steps":[`)
	for i, s := range l.steps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s))
	}
	b.WriteString(`],"cols":{`)
	keys := make([]string, 0, len(l.cols))
	for k := range l.cols {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		appendJSON(b, k)
		b.WriteByte(':')
		l.cols[k].appendJSON(b)
	}
	b.WriteString(`},"trace":{`)
	first := true
	for _, s := range l.steps {
		if id, ok := l.trace[s]; ok {
			if !first {
				b.WriteByte(',')
			}
			first = false
			appendJSON(b, strconv.Itoa(s))
			b.WriteByte(':')
			appendJSON(b, id)
		}
	}
	b.WriteString(`},"sums":{`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		s := l.sums[k]
		appendJSON(b, k)
		b.WriteString(":[")
		b.Write(strconv.AppendFloat(nil, s[0], 'g', -1, 64))
		b.WriteByte(',')
		b.Write(strconv.AppendFloat(nil, s[1], 'g', -1, 64))
		b.WriteByte(']')
	}
	b.WriteString("}}")
}

// column is one key's values over a page log's kept lines, held as the
// page's JSON numbers (null for none; 6 significant digits unless exact):
// each page copies them instead of formatting every number again.
type column struct {
	enc   []byte  // the values, each followed by a comma
	ends  []int32 // where each value's comma ends in enc
	exact bool    // full precision (exactKey)
}

// push appends v.
func (c *column) push(v float64) {
	prec := 6
	if c.exact {
		prec = -1
	}
	if isFinite(v) {
		c.enc = strconv.AppendFloat(c.enc, v, 'g', prec, 64)
	} else {
		c.enc = append(c.enc, "null"...)
	}
	c.enc = append(c.enc, ',')
	c.ends = append(c.ends, int32(len(c.enc)))
}

// value is the JSON of value i.
func (c *column) value(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.enc[start : c.ends[i]-1]
}

// truncate keeps the first n values.
func (c *column) truncate(n int) {
	c.ends = c.ends[:n]
	c.enc = c.enc[:0]
	if n > 0 {
		c.enc = c.enc[:c.ends[n-1]]
	}
}

// keep keeps the values at the increasing indices idx.
func (c *column) keep(idx []int) {
	w := int32(0)
	for j, i := range idx {
		w += int32(copy(c.enc[w:], c.value(i))) // moves left: the source is not yet overwritten
		c.enc[w] = ','
		w++
		c.ends[j] = w
	}
	c.enc, c.ends = c.enc[:w], c.ends[:len(idx)]
}

// appendJSON appends the column as a JSON array, or as one number when
// it holds the same number on every line (see pageLog.appendJSON).
func (c *column) appendJSON(b *bytes.Buffer) {
	if n := len(c.ends); n > 1 && c.constant() {
		b.Write(c.value(0))
		return
	}
	b.WriteByte('[')
	if len(c.enc) > 0 {
		b.Write(c.enc[:len(c.enc)-1])
	}
	b.WriteByte(']')
}

// constant reports whether every value is the first, a number.
func (c *column) constant() bool {
	first := c.value(0)
	if string(first) == "null" {
		return false
	}
	for i := 1; i < len(c.ends); i++ {
		if !bytes.Equal(c.value(i), first) {
			return false
		}
	}
	return true
}
