package tasks

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// RowError is a problem with one row of a Parquet data set.
type RowError struct {
	Row int   // 1-based row number
	Err error // what is wrong with it
}

// Error reads "row 7: \"answer\" is null".
func (e *RowError) Error() string { return fmt.Sprintf("row %d: %v", e.Row, e.Err) }

// Unwrap returns the cause.
func (e *RowError) Unwrap() error { return e.Err }

// MaxDatasetRows bounds the rows a data set may have.
const MaxDatasetRows = 1 << 24

// LoadParquet reads the prompt and answer columns of a Parquet file (the
// Hugging Face hub's format for data sets). Both must be top-level
// columns; the prompt a string, the answer a string or a number (kept as
// its text). A null, a missing column or a column of another type gives
// one error naming it (a *RowError for a row).
func LoadParquet(r io.ReaderAt, size int64, fields Fields) ([]Problem, error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a Parquet file: %w", err)
	}
	if f.NumRows() > MaxDatasetRows {
		return nil, fmt.Errorf("%d rows, more than %d", f.NumRows(), MaxDatasetRows)
	}
	var columns []string
	for _, fl := range f.Schema().Fields() {
		columns = append(columns, fl.Name())
	}
	pName, aName, err := fields.resolve(columns)
	if err != nil {
		return nil, err
	}
	pCol, err := leafColumn(f.Schema(), pName)
	if err != nil {
		return nil, err
	}
	aCol, err := leafColumn(f.Schema(), aName)
	if err != nil {
		return nil, err
	}
	out := make([]Problem, 0, f.NumRows())
	row := 0
	buf := make([]parquet.Row, 128)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				row++
				p, perr := problemOf(r, pCol, aCol, pName, aName)
				if perr != nil {
					rows.Close()
					return nil, &RowError{Row: row, Err: perr}
				}
				out = append(out, p)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("row %d: %w", row+1, err)
			}
		}
		rows.Close()
	}
	if len(out) == 0 {
		return nil, ErrEmptyDataset
	}
	return out, nil
}

// leafColumn is the column index of a top-level, non-repeated leaf column.
func leafColumn(s *parquet.Schema, name string) (int, error) {
	leaf, ok := s.Lookup(name)
	if !ok || leaf.Node == nil || !leaf.Node.Leaf() || leaf.MaxRepetitionLevel > 0 {
		return 0, fmt.Errorf("column %q is not a string or number column (lists and structs are not supported)", name)
	}
	return leaf.ColumnIndex, nil
}

// problemOf reads the two columns of one row.
func problemOf(r parquet.Row, pCol, aCol int, pName, aName string) (Problem, error) {
	var p Problem
	found := 0
	for _, v := range r {
		switch v.Column() {
		case pCol:
			if v.IsNull() {
				return p, fmt.Errorf("%q is null", pName)
			}
			if v.Kind() != parquet.ByteArray {
				return p, fmt.Errorf("%q is a %s, not a string", pName, v.Kind())
			}
			p.Prompt = string(v.ByteArray())
			found++
		case aCol:
			s, err := valueText(v, aName)
			if err != nil {
				return p, err
			}
			p.Answer = s
			found++
		}
	}
	if found < 2 {
		return p, fmt.Errorf("has no %q or %q value", pName, aName)
	}
	return p, nil
}

// valueText is a string or number value as text.
func valueText(v parquet.Value, name string) (string, error) {
	if v.IsNull() {
		return "", fmt.Errorf("%q is null", name)
	}
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return string(v.ByteArray()), nil
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10), nil
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10), nil
	case parquet.Float, parquet.Double:
		x, bits := v.Double(), 64
		if v.Kind() == parquet.Float {
			x, bits = float64(v.Float()), 32
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("%q is %v", name, x)
		}
		return strconv.FormatFloat(x, 'f', -1, bits), nil
	}
	return "", fmt.Errorf("%q is a %s, not a string or a number", name, v.Kind())
}

// LoadParquetFile reads the Parquet data set at path.
func LoadParquetFile(path string, fields Fields) ([]Problem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	ps, err := LoadParquet(f, fi.Size(), fields)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return ps, nil
}
