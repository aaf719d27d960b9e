package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// writeParquet writes rows of T to dir/name.
func writeParquet[T any](t *testing.T, dir, name string, rows []T) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

type queryRow struct {
	Query  string `parquet:"query"`
	Target int64  `parquet:"target"`
	Source string `parquet:"source"`
}

type trlRow struct {
	Prompt   string `parquet:"prompt"`
	Solution string `parquet:"solution"`
}

type nullableRow struct {
	Question string  `parquet:"question"`
	Answer   *string `parquet:"answer,optional"`
}

type listRow struct {
	Question string   `parquet:"question"`
	Answer   []string `parquet:"answer,list"`
}

func TestLoadParquetColumns(t *testing.T) {
	dir := t.TempDir()
	q := writeParquet(t, dir, "q.parquet", []queryRow{{"12+7=", 19, "a"}, {"1+1=", 2, "b"}})
	ps, err := LoadRows(q, Fields{Prompt: "query", Answer: "target"})
	if err != nil || len(ps) != 2 || ps[0] != (Problem{"12+7=", "19"}) || ps[1] != (Problem{"1+1=", "2"}) {
		t.Fatalf("query/target: %v, %v", ps, err)
	}
	trl := writeParquet(t, dir, "trl.parquet", []trlRow{{"3+4=", "7"}})
	if ps, err := LoadRows(trl, Fields{}); err != nil || ps[0] != (Problem{"3+4=", "7"}) {
		t.Fatalf("TRL prompt/solution picked up: %v, %v", ps, err)
	}
	two := "2"
	cases := []struct {
		name    string
		path    string
		fields  Fields
		wantSub string
	}{
		{"missing column", q, Fields{Prompt: "query", Answer: "label"}, `missing answer column "label" (set by task.answer_field; columns: query, target, source)`},
		{"no default column", q, Fields{}, "no prompt column: none of prompt, question, problem (set task.prompt_field; columns: query, target, source)"},
		{"null answer", writeParquet(t, dir, "n.parquet", []nullableRow{{"a", &two}, {"b", nil}}), Fields{}, `row 2: "answer" is null`},
		{"list answer", writeParquet(t, dir, "l.parquet", []listRow{{"a", []string{"x"}}}), Fields{}, `column "answer" is not a string or number column`},
		{"number prompt", q, Fields{Prompt: "target", Answer: "query"}, `row 1: "target" is a INT64, not a string`},
	}
	for _, c := range cases {
		_, err := LoadRows(c.path, c.fields)
		if err == nil || !strings.Contains(err.Error(), c.wantSub) {
			t.Errorf("%s: error = %v, want one containing %q", c.name, err, c.wantSub)
		}
		if err != nil && strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: error spans lines: %q", c.name, err)
		}
	}
	if _, err := LoadRows(filepath.Join(dir, "x.csv"), Fields{}); err == nil || !strings.Contains(err.Error(), `unknown format ".csv"`) {
		t.Errorf("csv: %v", err)
	}
}

func TestLoadJSONLFields(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gsm.jsonl")
	body := `{"question": "1+1=", "answer": 2}` + "\n" + `{"question": "2+2=", "answer": "4"}` + "\n" + `{"question": "3+3="}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadRows(path, Fields{})
	if want := `line 3: missing "answer"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want %q", err, want)
	}
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Errorf("error %v is not a *LineError for line 3", err)
	}
	ps, err := LoadJSONLFields(strings.NewReader(`{"q": "x", "a": "y"}`), Fields{Prompt: "q", Answer: "a"})
	if err != nil || ps[0] != (Problem{"x", "y"}) {
		t.Errorf("q/a: %v, %v", ps, err)
	}
}

func TestOpenDatasetsHeldOut(t *testing.T) {
	dir := t.TempDir()
	var rows []queryRow
	for i := range 20 {
		rows = append(rows, queryRow{Query: strings.Repeat("1", i+1) + "+0=", Target: int64(i), Source: "s"})
	}
	path := writeParquet(t, dir, "d.parquet", rows)
	src := Source{Path: path, Fields: Fields{Prompt: "query", Answer: "target"}, EvalFraction: 0.25, Seed: 3}
	train, eval, err := OpenDatasets(src, "addition", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 15 || eval.Len() != 5 {
		t.Fatalf("split %d/%d, want 15/5", train.Len(), eval.Len())
	}
	seen := map[string]bool{}
	for i := range train.Len() {
		seen[train.At(i).Prompt] = true
	}
	for i := range eval.Len() {
		if seen[eval.At(i).Prompt] {
			t.Errorf("held-out row %q is also a training row", eval.At(i).Prompt)
		}
	}
	train2, eval2, _ := OpenDatasets(src, "addition", Options{})
	if train2.At(0) != train.At(0) || eval2.At(0) != eval.At(0) {
		t.Error("the split is not deterministic")
	}
	src.EvalFraction = 0.99
	if _, _, err := OpenDatasets(src, "addition", Options{}); err == nil || !strings.Contains(err.Error(), "leaves no training rows") {
		t.Errorf("fraction 0.99: %v", err)
	}
	evalPath := writeParquet(t, dir, "e.parquet", rows[:3])
	src.EvalFraction, src.EvalPath = 0, evalPath
	train, eval, err = OpenDatasets(src, "addition", Options{})
	if err != nil || train.Len() != 20 || eval.Len() != 3 {
		t.Fatalf("eval file: %v, %v, %v", train, eval, err)
	}
	src.EvalPath = ""
	if _, eval, err := OpenDatasets(src, "addition", Options{}); err != nil || eval != nil {
		t.Errorf("no split: eval = %v, %v", eval, err)
	}
}

// TestWordProblemsGSM8KAnswers: a gold answer in GSM8K's form (a worked
// solution ending in "#### n") is verified by its final integer and is the
// warm start's solution.
func TestWordProblemsGSM8KAnswers(t *testing.T) {
	task, err := New("wordproblems", Options{})
	if err != nil {
		t.Fatal(err)
	}
	gold := "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nAltogether she sold 48+24 = <<48+24=72>>72 clips.\n#### 1,072"
	if err := task.(AnswerValidator).ValidateAnswer(gold); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Verdict{"#### 1072": Correct, "so #### 01072": Correct, "#### 72": Wrong, "1072": Malformed}
	for completion, want := range cases {
		if got := task.Verify(completion, gold); got != want {
			t.Errorf("Verify(%q) = %v, want %v", completion, got, want)
		}
	}
	sol, err := task.Solution(Problem{Prompt: "How many clips?", Answer: gold}, nil)
	if err != nil || sol != gold || task.Verify(sol, gold) != Correct {
		t.Errorf("Solution = %q, %v; want the worked solution, verified correct", sol, err)
	}
	if err := task.(AnswerValidator).ValidateAnswer("about seventy"); err == nil || !strings.Contains(err.Error(), `"#### <integer>"`) {
		t.Errorf("ValidateAnswer(prose) = %v", err)
	}
}
