package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/tokenizer"
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
		"no checkpoint":    {"score", "--input", writeInput(t, good)},
		"missing dir":      {"score", "--checkpoint", filepath.Join(dir, "nope"), "--input", writeInput(t, good)},
		"zero temperature": {"score", "--checkpoint", dir, "--input", writeInput(t, good), "--temperature", "0"},
		"missing input":    {"score", "--checkpoint", dir, "--input", filepath.Join(dir, "nope.jsonl")},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line", name, code, stderr.String())
		}
	}
}
