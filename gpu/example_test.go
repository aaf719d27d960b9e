package gpu_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// Parameter counts (DESIGN §4 quotes about 25k, 0.1M and 0.85M; SmolLM2-135M
// has 134.5M; Qwen2.5-0.5B 494.0M, 27648 of them its q/k/v biases).
func ExamplePreset() {
	for _, name := range gpu.PresetNames() {
		c, _ := gpu.Preset(name)
		fmt.Printf("%s: %d params\n", name, c.NumParams())
	}
	// Output:
	// tiny: 26912 params
	// small: 119360 params
	// base: 878208 params
	// smollm2-135m: 134515008 params
	// qwen2.5-0.5b: 494032768 params
}

// A warm-start step, a GRPO step with gpu/loss, and sampling from the
// published snapshot.
func ExampleLearner() {
	tok := tokenizer.NewChar()
	cfg, _ := gpu.Preset("tiny")
	m, _ := gpu.NewModel(cfg, 1)
	l, _ := gpu.NewLearner(m, gpu.DefaultLearnerConfig())

	p, _ := tok.Encode("12+34=")
	c, _ := tok.Encode("46")
	prompt := append([]int{tok.BOS()}, p...)
	gold := gpu.Sequence{Prompt: prompt, Completion: append(c, tok.EOS())}
	st, _ := l.SupervisedStep([]gpu.Sequence{gold})
	fmt.Println(st.Version, st.Tokens)

	samples, _ := l.Snapshot().Sample([][]int{prompt}, 4, gpu.SampleOptions{Temperature: 1, MaxNewTokens: 4, EOS: tok.EOS(), Seeds: gpu.PromptSeeds(7, 1)})
	b := gpu.Batch{}
	for _, s := range samples {
		b.Seqs = append(b.Seqs, gpu.Sequence{Prompt: prompt, Completion: s.Tokens})
	}
	lb := b.LossBatch()
	lb.Advantages = []float64{1, -1, 0.5, -0.5}
	st, _ = l.Step(b, 1, func(lp, _ []float64) (loss.Result, error) { return loss.Policy(loss.Default(), lb, lp) })
	fmt.Println(st.Version)
	// Output:
	// 1 3
	// 2
}
