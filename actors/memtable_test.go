package actors

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
)

// readmeModels are the models of the README's memory table, by the name
// its rows give them.
var readmeModels = map[string]gpu.Config{
	"Llama hidden 128, 4 layers": {Hidden: 128, Layers: 4, Heads: 4, KVHeads: 4, MLP: 384, Context: 2048, RopeTheta: 1e4, NormEps: 1e-6},
	"SmolLM2-135M":               {Vocab: 49152, Hidden: 576, Layers: 30, Heads: 9, KVHeads: 3, MLP: 1536, Context: 8192, RopeTheta: 1e5, NormEps: 1e-5, TieEmbeddings: true},
	"Qwen2.5-0.5B": {Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, MLP: 4864, Context: 32768, RopeTheta: 1e6, NormEps: 1e-6,
		TieEmbeddings: true, Arch: gpu.ArchQwen2},
	"Qwen3-0.6B": {Vocab: 151936, Hidden: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadWidth: 128, MLP: 3072, Context: 40960, RopeTheta: 1e6,
		NormEps: 1e-6, TieEmbeddings: true, Arch: gpu.ArchQwen3},
}

// TestREADMEMemoryTable: every estimate in the README's memory table is
// the run's (runBytes on 2 cores: a run from a checkpoint, prompts of 100
// tokens, 8 generations, one generator), to its 0.1 GB.
func TestREADMEMemoryTable(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| model (vocabulary) | prompts × generations |")
	if !ok {
		t.Fatal("README has no memory table")
	}
	rows := 0
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		rows++
		checkMemoryRow(t, line)
	}
	if rows < 5 {
		t.Errorf("%d rows in the README's memory table", rows)
	}
}

// checkMemoryRow checks one row: "| model (vocabulary) | P × 8 | L | GB | GB | GB |"
// for train.micro_batch 0, 16 and 4.
func checkMemoryRow(t *testing.T, line string) {
	t.Helper()
	cells := strings.Split(strings.Trim(line, "| "), " | ")
	name, vocab, _ := strings.Cut(strings.TrimSuffix(cells[0], ")"), " (")
	model, ok := readmeModels[name]
	var v, prompts, completion int
	_, err1 := fmt.Sscanf(strings.ReplaceAll(vocab, ",", ""), "%d", &v)
	_, err2 := fmt.Sscanf(cells[1]+" "+cells[2], "%d × 8 %d", &prompts, &completion)
	if !ok || err1 != nil || err2 != nil || len(cells) != 6 {
		t.Errorf("row %q: model %q known %t, %v, %v", line, name, ok, err1, err2)
		return
	}
	model.Vocab = v
	for i, micro := range []int{0, 16, 4} {
		cfg := config.Default()
		cfg.Model.Checkpoint = "hf"
		cfg.Train.PromptsPerStep, cfg.Train.MicroBatch = prompts, micro
		cfg.Generation.NumGenerations, cfg.Generation.MaxCompletionLen = 8, completion
		if got := fmt.Sprintf("%.1f", float64(runBytes(cfg, model, 100))/1e9); got != cells[3+i] {
			t.Errorf("%s, %d × 8, %d tokens, micro-batch %d: the estimate is %s GB, the README says %s", cells[0], prompts, completion, micro, got, cells[3+i])
		}
	}
}
