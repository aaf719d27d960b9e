package tasks

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadJSONLGood(t *testing.T) {
	in := "\xef\xbb\xbf{\"prompt\": \"37+45=\", \"answer\": \"82\"}\r\n" +
		"\n   \n" +
		`{"answer": 30, "prompt": "3,7,9>30:", "source": "x", "meta": {"k": [1]}}` + "\n" +
		`{"prompt":"é\u00e9\n","answer":"-1.5e3"}` // no final newline
	got, err := LoadJSONLFields(strings.NewReader(in), Fields{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{{"37+45=", "82"}, {"3,7,9>30:", "30"}, {"éé\n", "-1.5e3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadJSONLFields = %q, want %q", got, want)
	}
}

func TestLoadJSONLBadLine(t *testing.T) {
	good := `{"prompt": "1+1=", "answer": "2"}`
	cases := []struct {
		name, line, want string
	}{
		{"missing answer", `{"prompt": "1+1="}`, `line 3: missing "answer"`},
		{"missing prompt", `{"answer": "2"}`, `line 3: missing "prompt"`},
		{"null answer", `{"prompt": "1+1=", "answer": null}`, `line 3: "answer" is not a string or a number`},
		{"bool answer", `{"prompt": "1+1=", "answer": true}`, `line 3: "answer" is not a string or a number`},
		{"number prompt", `{"prompt": 11, "answer": "2"}`, `line 3: "prompt" is not a string`},
		{"array", `["1+1=", "2"]`, `line 3: not a JSON object`},
		{"null line", `null`, `line 3: not a JSON object`},
		{"string line", `"1+1="`, `line 3: not a JSON object`},
		{"truncated", `{"prompt": "1+1=", "answer"`, `line 3: invalid JSON: unexpected end of JSON input`},
		{"two objects", good + good, `line 3: invalid JSON: invalid character '{' after top-level value`},
	}
	for _, tc := range cases {
		_, err := LoadJSONLFields(strings.NewReader(good+"\n\n"+tc.line+"\n"+good+"\n"), Fields{})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 3 || err.Error() != tc.want {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLoadJSONLEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n", "  \r\n"} {
		if _, err := LoadJSONLFields(strings.NewReader(in), Fields{}); !errors.Is(err, ErrEmptyDataset) {
			t.Errorf("LoadJSONLFields(%q, Fields{}) error = %v, want ErrEmptyDataset", in, err)
		}
	}
}

func TestLoadJSONLHugeLines(t *testing.T) {
	// A 500 kB prompt loads; a line over MaxLineBytes is refused by number.
	long := strings.Repeat("x", 500_000)
	got, err := LoadJSONLFields(strings.NewReader(`{"prompt":"`+long+`","answer":"1"}`), Fields{})
	if err != nil || len(got) != 1 || got[0].Prompt != long {
		t.Fatalf("500 kB line: %d problems, %v", len(got), err)
	}
	tooLong := `{"prompt":"1","answer":"1"}` + "\n" + `{"prompt":"` + strings.Repeat("x", MaxLineBytes) + `","answer":"1"}`
	_, err = LoadJSONLFields(strings.NewReader(tooLong), Fields{})
	want := "line 2: longer than 1048576 bytes"
	if err == nil || err.Error() != want {
		t.Errorf("over-long line: error = %v, want %q", err, want)
	}
}

func TestLoadJSONLFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data.jsonl")
	if err := os.WriteFile(path, []byte(`{"prompt":"1+1=","answer":"2"}`+"\n"+`{"prompt":"1+2="}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadJSONLFile(path, Fields{})
	if want := "dataset " + path + `: line 2: missing "answer"`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	if _, err := LoadJSONLFile(filepath.Join(dir, "none.jsonl"), Fields{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error = %v, want os.ErrNotExist", err)
	}
}

func TestDataset(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cd.jsonl")
	lines := `{"prompt":"3,7,9>30:","answer":"3,7,9>30"}` + "\n" + `{"prompt":"2,5>10:","answer":"2,5>10"}` + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _, err := OpenDatasets(Source{Path: path}, "countdown-lite", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() != "countdown" || d.Len() != 2 || d.At(1).Answer != "2,5>10" {
		t.Fatalf("dataset %s with %d problems, second %+v", d.Name(), d.Len(), d.At(1))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 100 {
		p := d.Generate(rng)
		seen[p.Answer] = true
		s, err := d.Solution(p, rng)
		if err != nil || d.Verify(s, p.Answer) != Correct {
			t.Fatalf("%+v: solution %q, %v", p, s, err)
		}
	}
	if len(seen) != 2 {
		t.Errorf("100 draws saw %d of 2 problems", len(seen))
	}
	if d.Canonical("(2*5)") != "2*5" || d.ValidateAnswer("2,5>10") != nil {
		t.Error("Canonical/ValidateAnswer not delegated")
	}
}

func TestDatasetRejectsBadAnswers(t *testing.T) {
	cd := mustTask(t, "countdown", Options{})
	_, err := NewDataset([]Problem{{"a", "3,7>10"}, {"b", "3,7"}}, cd)
	if !errors.Is(err, ErrBadAnswer) || !strings.HasPrefix(err.Error(), "problem 1: ") {
		t.Errorf("error = %v, want problem 1: ErrBadAnswer", err)
	}
	if _, err := NewDataset(nil, cd); !errors.Is(err, ErrEmptyDataset) {
		t.Errorf("empty: error = %v, want ErrEmptyDataset", err)
	}
	if _, _, err := OpenDatasets(Source{Path: "x.jsonl"}, "chess", Options{}); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("unknown verifier: error = %v, want ErrUnknownTask", err)
	}
}

func TestDatasetCopiesInput(t *testing.T) {
	ps := []Problem{{"1+1=", "2"}}
	d, err := NewDataset(ps, mustTask(t, "addition", Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ps[0].Answer = "3"
	if d.At(0).Answer != "2" {
		t.Error("NewDataset kept a reference to its input")
	}
}
