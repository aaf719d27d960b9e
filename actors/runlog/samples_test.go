package runlog

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestEncodeSamples(t *testing.T) {
	tests := []struct {
		name string
		cols []string
		rows [][]any
		want string
	}{
		{"no rows", []string{"a"}, nil, `{"columns": ["a"], "data": []}` + "\n"},
		{"two rows, NaN as null", []string{"step", "prompt", "q_mass"},
			[][]any{{1, "12+3=", 0.7}, {1, "4+4=", math.NaN()}},
			"{\"columns\": [\"step\",\"prompt\",\"q_mass\"], \"data\": [\n  [1,\"12+3=\",0.7],\n  [1,\"4+4=\",null]\n]}\n"},
		{"float32 Inf", []string{"x"}, [][]any{{float32(math.Inf(-1))}}, "{\"columns\": [\"x\"], \"data\": [\n  [null]\n]}\n"},
	}
	for _, tc := range tests {
		got, err := EncodeSamples(tc.cols, tc.rows)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		var v struct {
			Columns []string `json:"columns"`
			Data    [][]any  `json:"data"`
		}
		if err := json.Unmarshal(got, &v); err != nil || len(v.Columns) != len(tc.cols) || len(v.Data) != len(tc.rows) {
			t.Errorf("%s: does not parse back: %v %+v", tc.name, err, v)
		}
	}
}

// TestEncodeSamplesExtraTable: an extra table (the top-k KL tokens) goes
// beside the samples under its name, in the same columns/data form; the
// samples stay where a reader of the original's sidecar looks.
func TestEncodeSamplesExtraTable(t *testing.T) {
	high := SampleTable{Name: HighKLTable, Columns: []string{"position", "kl"}, Rows: [][]any{{3, 0.25}, {0, math.Inf(1)}}}
	got, err := EncodeSamples([]string{"a"}, [][]any{{1}}, high)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"columns\": [\"a\"], \"data\": [\n  [1]\n],\n\"high_kl_tokens\": {\"columns\": [\"position\",\"kl\"], \"data\": [\n  [3,0.25],\n  [0,null]\n]}}\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var v struct {
		Data [][]any `json:"data"`
		High struct {
			Columns []string `json:"columns"`
			Data    [][]any  `json:"data"`
		} `json:"high_kl_tokens"`
	}
	if err := json.Unmarshal(got, &v); err != nil || len(v.Data) != 1 || len(v.High.Data) != 2 || v.High.Columns[1] != "kl" {
		t.Errorf("does not parse back: %v %+v", err, v)
	}
	for _, bad := range []SampleTable{{Name: "", Columns: []string{"x"}}, {Name: "data", Columns: []string{"x"}},
		{Name: HighKLTable, Columns: []string{"x"}, Rows: [][]any{{1, 2}}}} {
		if _, err := EncodeSamples([]string{"a"}, nil, bad); !errors.Is(err, ErrBadTable) {
			t.Errorf("table %+v: err = %v, want ErrBadTable", bad, err)
		}
	}
	if n := len(HighKLColumns()); n != 11 {
		t.Errorf("%d high-KL columns: %v", n, HighKLColumns())
	}
}

func TestEncodeSamplesKeepsInput(t *testing.T) {
	row := []any{math.NaN()}
	if _, err := EncodeSamples([]string{"x"}, [][]any{row}); err != nil {
		t.Fatal(err)
	}
	if f, ok := row[0].(float64); !ok || !math.IsNaN(f) {
		t.Errorf("input row modified: %v", row)
	}
}

func TestEncodeSamplesBadRow(t *testing.T) {
	if _, err := EncodeSamples([]string{"a", "b"}, [][]any{{1}}); !errors.Is(err, ErrBadTable) {
		t.Errorf("short row: err = %v, want ErrBadTable", err)
	}
	if _, err := EncodeSamples([]string{"a"}, [][]any{{make(chan int)}}); !errors.Is(err, ErrBadTable) {
		t.Errorf("unencodable value: err = %v, want ErrBadTable", err)
	}
}

func TestStandardSampleColumns(t *testing.T) {
	// spec §3.1: the twelve fixed columns, then reward/{key} per reward;
	// then (mgrpo) the generator that drew the completion.
	got := StandardSampleColumns([]string{"accuracy", "format"})
	if len(got) != 15 || got[0] != "step" || got[4] != "reward_rank_desc" || got[11] != "update_mass_proxy" ||
		got[12] != "reward/accuracy" || got[13] != "reward/format" || got[14] != "generator" {
		t.Errorf("columns = %v", got)
	}
}

func TestWriteSamplesAndResume(t *testing.T) {
	d, err := Create(t.TempDir(), "s")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, step := range []int{10, 20, 30} {
		if err := d.WriteSamples(step, []string{"step"}, [][]any{{step}}); err != nil {
			t.Fatal(err)
		}
	}
	if SamplesFileName(20) != "step_000020.json" {
		t.Errorf("SamplesFileName(20) = %q", SamplesFileName(20))
	}
	if _, err := d.Resume(20); err != nil {
		t.Fatal(err)
	}
	for step, want := range map[int]bool{10: true, 20: true, 30: false} {
		_, err := os.Stat(filepath.Join(d.Path(), SamplesDir, SamplesFileName(step)))
		if (err == nil) != want {
			t.Errorf("after Resume(20): step %d sidecar exists = %v, want %v", step, err == nil, want)
		}
	}
}
