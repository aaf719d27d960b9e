package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/hfconfig"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/internal/tokenizer/chat"
	"github.com/mgrpo/mgrpo/internal/tokenizer/tokentest"
)

// runOK runs mgrpo-node with args and returns its standard output; a
// non-zero exit fails the test.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("mgrpo-node %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// initTokenizerCheckpoint writes tokentest's tokenizer and, with
// `mgrpo-node init --tokenizer` and extra flags, a checkpoint for it; it
// returns the checkpoint and tokenizer directories.
func initTokenizerCheckpoint(t *testing.T, extra ...string) (ckpt, tokDir string) {
	t.Helper()
	tokDir, ckpt = filepath.Join(t.TempDir(), "tok"), filepath.Join(t.TempDir(), "ckpt")
	if _, err := tokentest.Write(tokDir); err != nil {
		t.Fatal(err)
	}
	runOK(t, append([]string{"init", "--tokenizer", tokDir, "--out", ckpt}, extra...)...)
	return ckpt, tokDir
}

// TestInitTokenizer: `init --tokenizer --arch qwen3` and the shape flags
// write a Hugging Face checkpoint with no Python: config.json of Qwen3 with
// the tokenizer's special tokens, the tokenizer's files as they were, and
// a model that loads with that shape and scores text in that tokenizer's
// ids.
func TestInitTokenizer(t *testing.T) {
	ckpt, tokDir := initTokenizerCheckpoint(t, "--arch", "qwen3", "--hidden", "32", "--layers", "2", "--heads", "4",
		"--kv_heads", "2", "--head_dim", "16", "--mlp", "48", "--context", "96", "--vocab", "320", "--rope_theta", "1e6", "--tie_embeddings")
	h, err := hfconfig.Read(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	src, err := tokenizer.Load(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	if h.ModelType != "qwen3" || len(h.Architectures) != 1 || h.Architectures[0] != "Qwen3ForCausalLM" ||
		h.EOSTokenID != src.EOS() || h.PadTokenID != src.PAD() || h.BOSTokenID >= 0 {
		t.Errorf("config.json: model_type %s %v, BOS %d EOS %d PAD %d; want qwen3, EOS %d, PAD %d, no BOS",
			h.ModelType, h.Architectures, h.BOSTokenID, h.EOSTokenID, h.PadTokenID, src.EOS(), src.PAD())
	}
	for _, f := range []string{tokenizer.FileName, tokenizer.TokenizerConfigFile} {
		a, _ := os.ReadFile(filepath.Join(tokDir, f))
		b, _ := os.ReadFile(filepath.Join(ckpt, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s is not the tokenizer's as it was", f)
		}
	}
	m, tok, err := gpu.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	want := gpu.Config{Vocab: 320, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, MLP: 48, Context: 96, RopeTheta: 1e6,
		NormEps: 1e-6, TieEmbeddings: true, Arch: gpu.ArchQwen3, HeadWidth: 16}
	if m.Config() != want || tok.VocabSize() != src.VocabSize() {
		t.Errorf("loaded %+v with %d ids; want %+v with %d", m.Config(), tok.VocabSize(), want, src.VocabSize())
	}
	in := writeInput(t, `{"prompt": "the ann has 3 pens", "completion": " #### 3<|im_end|>"}`)
	var got scoreOutput
	if err := json.Unmarshal([]byte(runOK(t, "score", "--checkpoint", ckpt, "--input", in)), &got); err != nil {
		t.Fatal(err)
	}
	ids, _ := src.Encode(" #### 3<|im_end|>")
	if fmt.Sprint(got.CompletionIDs) != fmt.Sprint(ids) || len(got.LogProbs) != len(ids) || ids[len(ids)-1] != src.EOS() {
		t.Errorf("score encoded the completion as %v (%d log-probs), the tokenizer as %v", got.CompletionIDs, len(got.LogProbs), ids)
	}
}

// TestInitTokenizerRefusals: what init cannot write is refused with one
// line naming the flag, and nothing is written.
func TestInitTokenizerRefusals(t *testing.T) {
	tokDir := filepath.Join(t.TempDir(), "tok")
	n, err := tokentest.Write(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tokenizer", tokDir, "--vocab", fmt.Sprint(n - 1)}, "--vocab"},
		{[]string{"--tokenizer", filepath.Join(tokDir, "missing")}, "--tokenizer"},
		{[]string{"--arch", "gemma"}, "--arch"},
		{[]string{"--hidden", "30", "--heads", "4"}, "shape"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"init", "--out", out}, tc.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want %d and one line naming %s", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%q: a refused init wrote %s", tc.args, out)
		}
	}
}

// templatedRun trains one step from an `init --tokenizer` checkpoint
// (context 112) with the tokenizer's chat template and a system prompt,
// on a data set named by a relative path, from the directory work; it
// returns the run directory.
func templatedRun(t *testing.T, work string) string {
	t.Helper()
	ckpt, _ := initTokenizerCheckpoint(t, "--preset", "tiny", "--context", "112")
	t.Chdir(work)
	var rows strings.Builder
	for i := range 12 {
		fmt.Fprintf(&rows, "{\"prompt\": \"%d+%d=\", \"answer\": \"%d\"}\n", i, 10+i, 10+2*i)
	}
	if err := os.WriteFile("sums.jsonl", []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, "--model.checkpoint", ckpt, "--task.dataset", "sums.jsonl", "--task.prompt_template", "tokenizer",
		"--task.system_prompt", "Be brief.", "--train.steps", "1", "--train.prompts_per_step", "2", "--generation.num_generations", "2",
		"--train.eval_prompts", "2", "--generation.max_completion_len", "8", "--train.checkpoint_every", "1", "--output.dir", "runs", "--output.name", "r")
	return filepath.Join(work, "runs", "r")
}

// TestRunRecordsWhatRuns: a run from a checkpoint records what runs (the
// checkpoint's context, not the preset's; the data set's absolute path:
// eval works from another directory), and resumes with the checkpoint's
// tokenizer and chat template (it took the built-in tokenizer, which has
// no chat format, and stopped).
func TestRunRecordsWhatRuns(t *testing.T) {
	work := t.TempDir()
	runDir := templatedRun(t, work)
	saved, err := config.Load(config.Sources{File: filepath.Join(runDir, "config.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	if saved.Model.Context != 112 || saved.Task.Dataset != filepath.Join(work, "sums.jsonl") {
		t.Errorf("config.yaml: model.context %d, task.dataset %q; want the checkpoint's 112 and %s", saved.Model.Context, saved.Task.Dataset, filepath.Join(work, "sums.jsonl"))
	}
	t.Chdir(t.TempDir())
	runOK(t, "eval", "--checkpoint", runDir, "--n", "2", "--k", "1")
	if out := runOK(t, "--resume", runDir, "--train.steps", "2"); !strings.Contains(out, "done: 2 steps") {
		t.Errorf("resumed run's output:\n%s", out)
	}
}

// TestScoreRunPromptTemplate: `score` on a run directory scores the text
// as training saw it (through the run's template and system prompt),
// unless --prompt_template says otherwise: the raw text scores
// differently (the issue's −37.8 raw against −19.05 templated).
func TestScoreRunPromptTemplate(t *testing.T) {
	runDir := templatedRun(t, t.TempDir())
	templated, raw := scoreSum(t, runDir), scoreSum(t, runDir, "--prompt_template", "")
	m, tok, err := gpu.LoadCheckpoint(filepath.Join(runDir, "checkpoints", "step-1"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := chat.NewPrompter(tok, "tokenizer", "Be brief.")
	if err != nil {
		t.Fatal(err)
	}
	want := [2]float64{sumScore(t, m, p, tok), sumScore(t, m, nil, tok)}
	if math.Abs(templated-want[0]) > 1e-9 || math.Abs(raw-want[1]) > 1e-9 || math.Abs(templated-raw) < 1e-3 {
		t.Errorf("score of the run: %g (want the templated %g), with --prompt_template \"\": %g (want the raw %g)", templated, want[0], raw, want[1])
	}
}

// scoreSum is `mgrpo-node score`'s sum_logprob of "10" after "0+10=" on
// checkpoint, with extra flags.
func scoreSum(t *testing.T, checkpoint string, extra ...string) float64 {
	t.Helper()
	in := writeInput(t, `{"prompt": "0+10=", "completion": "10"}`)
	var got scoreOutput
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"score", "--checkpoint", checkpoint, "--input", in}, extra...)...)), &got); err != nil {
		t.Fatal(err)
	}
	return got.SumLogProb
}

// sumScore is the log-prob of "10" after "0+10=" encoded by p (nil: the
// raw text with the tokenizer's special tokens), in process.
func sumScore(t *testing.T, m *gpu.Model, p *chat.Prompter, tok tokenizer.Tokenizer) float64 {
	t.Helper()
	prompt, err := tok.EncodePrompt("0+10=")
	if p != nil {
		prompt, err = p.Encode("0+10=")
	}
	if err != nil {
		t.Fatal(err)
	}
	completion, _ := tok.Encode("10")
	s, err := m.Score([]gpu.Sequence{{Prompt: prompt, Completion: completion}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, lp := range s[0].LogProbs {
		sum += lp
	}
	return sum
}
