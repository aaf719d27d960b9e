package actors

import (
	"time"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// Automatic request timeouts (cluster.request_timeout 0, the default): a
// timeout exists to give up on an actor that hangs or a node that froze,
// never on one that works. So each stage's is sized from the work one of
// its requests holds, at a rate well under what the device does on a bad
// day, and is never under minTimeout.
const (
	// minTimeout is the shortest automatic timeout.
	minTimeout = 30 * time.Second
	// slowCPU and slowGPU are the rates, in FLOP/s, the timeouts assume of
	// model.device cpu (two loaded cores did 10–130 GFLOP/s on the
	// model's products) and cuda.
	slowCPU, slowGPU = 1e9, 1e12
	// slowLink is the rate, in bytes/s, a weight publication's timeout
	// assumes of the network.
	slowLink = 20e6
)

// stageTimeouts returns the timeout of one request to each stage of a run
// of model whose sequences (prompt and completion) hold at most seqLen
// tokens (Stage_SYNC: a weight publication's last acknowledgement):
// cluster.request_timeout for every stage when set, else each stage's
// automatic one.
func stageTimeouts(cfg *config.Config, model gpu.Config, seqLen int) map[messages.Stage]time.Duration {
	t := make(map[messages.Stage]time.Duration)
	stages := []messages.Stage{messages.Stage_GENERATE, messages.Stage_REWARD, messages.Stage_REFERENCE,
		messages.Stage_LEARN, messages.Stage_CONTROL, messages.Stage_SYNC}
	if fixed := cfg.Cluster.RequestTimeout; fixed > 0 {
		for _, s := range stages {
			t[s] = fixed
		}
		return t
	}
	rate := slowCPU
	if cfg.Model.Device == "cuda" {
		rate = slowGPU
	}
	seqLen = min(seqLen, model.Context)
	seq := float64(seqLen) * model.FlopsPerToken(seqLen)
	group := float64(cfg.Generation.NumGenerations)
	part := float64(cfg.Train.PromptsPerPart) * group * seq
	work := map[messages.Stage]float64{
		messages.Stage_GENERATE:  part,
		messages.Stage_REWARD:    part, // a part's reference pass is relayed through its reward evaluator
		messages.Stage_REFERENCE: part,
		// The old log-probs' forward pass, then forward and backward (2×).
		messages.Stage_LEARN: 4 * float64(cfg.Train.PromptsPerStep) * group * seq,
	}
	for _, s := range stages {
		t[s] = max(minTimeout, seconds(work[s]/rate))
	}
	t[messages.Stage_SYNC] = max(minTimeout, seconds(float64(model.WeightBytes())/slowLink))
	return t
}

// sizeTimeouts sets the request timeouts of a run whose sequences hold at
// most seqLen tokens (the longest prompt and a completion).
func (s *settings) sizeTimeouts(cfg *config.Config, model gpu.Config, seqLen int) {
	t := stageTimeouts(cfg, model, seqLen)
	s.pipeline.Timeouts, s.record.timeouts = t, t
}

// seconds is s seconds as a Duration, rounded up to a whole second and at
// most a day.
func seconds(s float64) time.Duration {
	return time.Duration(min(s+0.999, 86400)) * time.Second
}
