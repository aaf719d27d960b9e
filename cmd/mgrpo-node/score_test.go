package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// scoreCheckpoint writes a tiny checkpoint and returns its directory and
// model.
func scoreCheckpoint(t *testing.T) (string, *gpu.Model) {
	t.Helper()
	cfg, _ := gpu.Preset("tiny")
	m, err := gpu.NewModel(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := gpu.SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func writeInput(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScoreCommand(t *testing.T) {
	dir, m := scoreCheckpoint(t)
	in := writeInput(t,
		`{"prompt": "12+34=", "completion": "46"}`,
		``,
		`{"prompt_ids": [1, 19, 14], "completion_ids": [20, 2]}`)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"score", "--checkpoint", dir, "--input", in, "--temperature", "0.7"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("score: exit %d, stderr %q", code, stderr.String())
	}
	tok := tokenizer.NewChar()
	p, _ := tok.Encode("12+34=")
	c, _ := tok.Encode("46")
	want, _ := m.Score([]gpu.Sequence{
		{Prompt: append([]int{tok.BOS()}, p...), Completion: c},
		{Prompt: []int{1, 19, 14}, Completion: []int{20, 2}},
	}, 0.7)
	sc := bufio.NewScanner(&stdout)
	lines := []int{1, 3}
	i := 0
	for ; sc.Scan(); i++ {
		var got scoreOutput
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("output line %d %q: %v", i+1, sc.Text(), err)
		}
		if got.Line != lines[i] || len(got.LogProbs) != len(want[i].LogProbs) || len(got.Entropies) != len(want[i].Entropies) {
			t.Fatalf("output %d: %+v, want line %d and %d tokens", i, got, lines[i], len(want[i].LogProbs))
		}
		var sum float64
		for j := range got.LogProbs {
			sum += got.LogProbs[j]
			if got.LogProbs[j] != want[i].LogProbs[j] || got.Entropies[j] != want[i].Entropies[j] {
				t.Errorf("output %d token %d: lp %g H %g, Model.Score gives %g %g", i, j,
					got.LogProbs[j], got.Entropies[j], want[i].LogProbs[j], want[i].Entropies[j])
			}
		}
		if math.Abs(sum-got.SumLogProb) > 1e-12 {
			t.Errorf("output %d: sum_logprob %g, want %g", i, got.SumLogProb, sum)
		}
	}
	if i != 2 {
		t.Errorf("%d output lines, want 2", i)
	}
}

func TestScoreBadInput(t *testing.T) {
	dir, _ := scoreCheckpoint(t)
	good := `{"prompt_ids": [1, 19], "completion_ids": [20]}`
	long := `{"prompt_ids": [1], "completion_ids": [` + strings.Repeat("20, ", 70) + `20]}`
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not JSON", `{"prompt": "1+1=", `, "not a JSON object"},
		{"unknown key", `{"prompt": "1", "answer": "2"}`, "not a JSON object"},
		{"mixed forms", `{"prompt": "1+1=", "completion_ids": [20]}`, `want either "prompt"`},
		{"character outside vocabulary", `{"prompt": "1+1=", "completion": "é"}`, "completion"},
		{"token id out of range", `{"prompt_ids": [1, 200], "completion_ids": [20]}`, "token id 200"},
		{"too long", long, "exceed the model's context of 64"},
		{"empty prompt", `{"prompt_ids": [], "completion_ids": [20]}`, "empty prompt_ids"},
		{"two objects on a line", good + " " + good, "more than one JSON value on the line"},
		{"trailing text", good + " x", "more than one JSON value on the line"},
	} {
		in := writeInput(t, good, tc.line)
		var stdout, stderr bytes.Buffer
		code := run([]string{"score", "--checkpoint", dir, "--input", in}, &stdout, &stderr)
		msg := stderr.String()
		if code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, in+":2: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line naming %s:2 and %q", tc.name, code, msg, in, tc.want)
		}
	}
	for name, args := range map[string][]string{
		"no checkpoint":        {"score", "--input", writeInput(t, good)},
		"missing dir":          {"score", "--checkpoint", filepath.Join(dir, "nope"), "--input", writeInput(t, good)},
		"zero temperature":     {"score", "--checkpoint", dir, "--input", writeInput(t, good), "--temperature", "0"},
		"tiny temperature":     {"score", "--checkpoint", dir, "--input", writeInput(t, good), "--temperature", "1e-45"},
		"below the floor":      {"score", "--checkpoint", dir, "--input", writeInput(t, good), "--temperature", "0.0009"},
		"infinite temperature": {"score", "--checkpoint", dir, "--input", writeInput(t, good), "--temperature", "inf"},
		"NaN temperature":      {"score", "--checkpoint", dir, "--input", writeInput(t, good), "--temperature", "NaN"},
		"missing input":        {"score", "--checkpoint", dir, "--input", filepath.Join(dir, "nope.jsonl")},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line", name, code, stderr.String())
		}
	}
}

// TestScoreTemperatureFloor: the smallest allowed temperature scores to
// finite numbers, so the floor leaves no NaN to report.
func TestScoreTemperatureFloor(t *testing.T) {
	dir, _ := scoreCheckpoint(t)
	in := writeInput(t, `{"prompt": "12+34=", "completion": "46"}`)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"score", "--checkpoint", dir, "--input", in, "--temperature", "0.001"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	var got scoreOutput
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.LogProbs) != 2 || !finite(got.SumLogProb) {
		t.Errorf("output %s (%v), want two finite log-probs", stdout.String(), err)
	}
}

// TestCheckFiniteScores names the input line of the first non-finite
// log-prob, entropy or sum.
func TestCheckFiniteScores(t *testing.T) {
	ok := gpu.TokenScores{LogProbs: []float64{-1, -2}, Entropies: []float64{0.5, 0.1}}
	cases := []struct {
		name string
		bad  gpu.TokenScores
		want string
	}{
		{"all finite", ok, ""},
		{"NaN log-prob", gpu.TokenScores{LogProbs: []float64{-1, math.NaN()}, Entropies: []float64{0, 0}}, "line 7: log-prob/entropy is not finite (are the checkpoint's weights finite?)"},
		{"-Inf log-prob", gpu.TokenScores{LogProbs: []float64{math.Inf(-1)}, Entropies: []float64{0}}, "line 7: log-prob/entropy is not finite (are the checkpoint's weights finite?)"},
		{"NaN entropy", gpu.TokenScores{LogProbs: []float64{-1}, Entropies: []float64{math.NaN()}}, "line 7: log-prob/entropy is not finite (are the checkpoint's weights finite?)"},
		{"sum overflows", gpu.TokenScores{LogProbs: []float64{-math.MaxFloat64, -math.MaxFloat64}, Entropies: []float64{0, 0}}, "line 7: log-prob/entropy is not finite (are the checkpoint's weights finite?)"},
	}
	for _, tc := range cases {
		err := checkFiniteScores([]gpu.TokenScores{ok, tc.bad}, []int{2, 7})
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("%s: checkFiniteScores = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestScoreNaNCheckpoint: a checkpoint whose weights are NaN ends with one
// line, not a JSON encoding error.
func TestScoreNaNCheckpoint(t *testing.T) {
	cfg, _ := gpu.Preset("tiny")
	w := make([]float32, cfg.NumParams())
	for i := range w {
		w[i] = float32(math.NaN())
	}
	m, err := gpu.NewModelFromWeights(cfg, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := gpu.SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
		t.Fatal(err)
	}
	in := writeInput(t, `{"prompt": "12+34=", "completion": "46"}`)
	var stdout, stderr bytes.Buffer
	code := run([]string{"score", "--checkpoint", dir, "--input", in}, &stdout, &stderr)
	msg := stderr.String()
	if code == exitOK || strings.Count(msg, "\n") != 1 || strings.Contains(msg, "json:") || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want a failure with one line and no JSON error", code, stdout.String(), msg)
	}
}

// TestScoreIDsNeedNoTokenizer: a Hugging Face checkpoint whose vocabulary
// is smaller than the built-in tokenizer's, without tokenizer.json, scores
// token ids as any other; text input gets one line saying what is missing.
func TestScoreIDsNeedNoTokenizer(t *testing.T) {
	cfg, _ := gpu.Preset("tiny")
	cfg.Vocab = 40
	m, err := gpu.NewModel(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := gpu.SaveCheckpoint(dir, m, nil); err != nil { // no tokenizer.json
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	in := writeInput(t, `{"prompt_ids": [1, 19, 14], "completion_ids": [20, 2]}`)
	if code := run([]string{"score", "--checkpoint", dir, "--input", in}, &stdout, &stderr); code != exitOK {
		t.Fatalf("ids: exit %d, stderr %q", code, stderr.String())
	}
	want, _ := m.Score([]gpu.Sequence{{Prompt: []int{1, 19, 14}, Completion: []int{20, 2}}}, 1)
	var got scoreOutput
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.LogProbs) != 2 || got.LogProbs[1] != want[0].LogProbs[1] {
		t.Errorf("ids: output %s (%v), want log-probs %v", stdout.String(), err, want[0].LogProbs)
	}
	stdout.Reset()
	stderr.Reset()
	in = writeInput(t, `{"prompt": "1+1=", "completion": "2"}`)
	code := run([]string{"score", "--checkpoint", dir, "--input", in}, &stdout, &stderr)
	if msg := stderr.String(); code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "text needs the checkpoint's tokenizer") {
		t.Errorf("text: exit %d, stderr %q; want exit %d and one line about the tokenizer", code, msg, exitUsage)
	}
}
