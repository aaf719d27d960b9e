package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// MaxLineBytes is the longest dataset line LoadJSONLFields accepts.
const MaxLineBytes = 1 << 20

// LineError is a problem with one line of a JSONL dataset.
type LineError struct {
	Line int   // 1-based line number
	Err  error // what is wrong with it
}

// Error reads "line 7: missing \"answer\"".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// LoadJSONLFields reads a dataset with one JSON object per line, the
// prompt and answer in the fields' keys (resolved from the keys of the
// first line when a field is ""). The prompt must be a string; the answer
// a string or a number (kept as its literal text, e.g. 82 becomes "82").
// Other keys are ignored, as are blank lines, a trailing '\r' and a
// leading byte-order mark. A bad line gives a *LineError naming its line;
// a dataset with no problems gives ErrEmptyDataset.
func LoadJSONLFields(r io.Reader, fields Fields) ([]Problem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLineBytes)
	var out []Problem
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		if len(b) == 0 {
			continue
		}
		p, err := parseLine(b, &fields, len(out) == 0)
		if err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("longer than %d bytes", MaxLineBytes)
		}
		return nil, &LineError{Line: line + 1, Err: err}
	}
	if len(out) == 0 {
		return nil, ErrEmptyDataset
	}
	return out, nil
}

// LoadJSONLFile reads the JSONL dataset at path; errors read
// `dataset data.jsonl: line 7: missing "answer"`.
func LoadJSONLFile(path string, fields Fields) ([]Problem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	defer f.Close()
	ps, err := LoadJSONLFields(f, fields)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return ps, nil
}

// parseLine decodes one non-blank line; the first one fixes the fields'
// names when they are "" and checks that the named ones are there.
func parseLine(b []byte, fields *Fields, first bool) (Problem, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return Problem{}, fmt.Errorf("not a JSON object")
		}
		return Problem{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if obj == nil {
		return Problem{}, fmt.Errorf("not a JSON object")
	}
	if first {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p, a, err := fields.resolve(keys)
		if err != nil {
			return Problem{}, err
		}
		fields.Prompt, fields.Answer = p, a
	}
	prompt, err := stringField(obj, fields.Prompt, false)
	if err != nil {
		return Problem{}, err
	}
	answer, err := stringField(obj, fields.Answer, true)
	if err != nil {
		return Problem{}, err
	}
	return Problem{Prompt: prompt, Answer: answer}, nil
}

// stringField reads a required string field; with numberOK a JSON number
// is accepted too and kept as written.
func stringField(obj map[string]json.RawMessage, key string, numberOK bool) (string, error) {
	raw, ok := obj[key]
	if !ok {
		return "", fmt.Errorf("missing %q", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && !bytes.Equal(raw, []byte("null")) {
		return s, nil
	}
	if numberOK {
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&n); err == nil && n != "" {
			return n.String(), nil
		}
		return "", fmt.Errorf("%q is not a string or a number", key)
	}
	return "", fmt.Errorf("%q is not a string", key)
}
