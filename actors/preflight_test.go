package actors

import (
	"testing"

	"github.com/mgrpo/mgrpo/config"
)

// TestRunBytesPadsToPrompts: the learner pads a batch to its longest
// sequence, not to the context, so a model with a long context needs no
// more memory for the same task than one with a short context. (The
// estimate used the context and refused a 2048-context run needing 77 MB.)
func TestRunBytesPadsToPrompts(t *testing.T) {
	custom := func(context int) *config.Config {
		return testConfig(t, func(c *config.Config) {
			c.Model.Preset, c.Model.Hidden, c.Model.Layers, c.Model.Heads, c.Model.MLP, c.Model.Context = "", 64, 2, 4, 192, context
		})
	}
	short, long := custom(64), custom(2048)
	s, l := testSettings(t, short), testSettings(t, long)
	prompt, _, err := longestPrompt(s.step)
	if err != nil || prompt < 5 || prompt > 40 {
		t.Fatalf("longest addition prompt: %d tokens, %v", prompt, err)
	}
	a, b := runBytes(short, s.model, prompt), runBytes(long, l.model, prompt)
	if float64(b) > 1.1*float64(a) {
		t.Errorf("context 2048 estimate %d bytes, context 64 %d: want within 10%%", b, a)
	}
}
