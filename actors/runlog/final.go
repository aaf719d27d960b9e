package runlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// FinalEvalFile is the record of a run's final evaluation, in the run
// directory.
const FinalEvalFile = "final_eval.json"

// FinalEval is what a run's final evaluation left: the greedy accuracy of
// the policy after its last step on Problems held-out problems, or why it
// was not measured. A run writes it once that evaluation has ended, after
// the last step's checkpoint; a run whose newest checkpoint is of Step has
// nothing left to do at that step.
type FinalEval struct {
	// Step is the run's last step, the one evaluated.
	Step int `json:"step"`
	// GreedyAccuracy is the accuracy measured; nil when not measured.
	GreedyAccuracy *float64 `json:"greedy_accuracy,omitempty"`
	// Problems is how many distinct held-out problems were measured.
	Problems int `json:"problems,omitempty"`
	// NotMeasured is why no accuracy was measured ("" when one was).
	NotMeasured string `json:"not_measured,omitempty"`
}

// WriteFinalEval records the run's final evaluation in final_eval.json
// (atomically: a reader sees no file or the whole one).
func (d *Dir) WriteFinalEval(f FinalEval) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("write %s: %w", FinalEvalFile, err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(d.path, FinalEvalFile), append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", FinalEvalFile, err)
	}
	return nil
}

// ReadFinalEval reads the final evaluation recorded in the run directory
// run. Without one the error wraps fs.ErrNotExist; one that cannot be
// read wraps ErrBadMetrics.
func ReadFinalEval(run string) (FinalEval, error) {
	path := filepath.Join(run, FinalEvalFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return FinalEval{}, fmt.Errorf("read final evaluation: %w", err)
	}
	var f FinalEval
	if err := json.Unmarshal(b, &f); err != nil {
		return FinalEval{}, fmt.Errorf("read final evaluation %s: %v: %w", path, err, ErrBadMetrics)
	}
	if f.Step < 0 || f.GreedyAccuracy != nil && !(*f.GreedyAccuracy >= 0 && *f.GreedyAccuracy <= 1) {
		return FinalEval{}, fmt.Errorf("read final evaluation %s: step %d, greedy accuracy out of [0, 1]: %w", path, f.Step, ErrBadMetrics)
	}
	return f, nil
}

// dropFinalEvalAfter removes a final evaluation of a step after step:
// a resume from step redoes that step, whose policy it no longer describes.
func dropFinalEvalAfter(run string, step int) error {
	f, err := ReadFinalEval(run)
	if err == nil && f.Step <= step {
		return nil
	}
	if err := os.Remove(filepath.Join(run, FinalEvalFile)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %w", FinalEvalFile, err)
	}
	return nil
}
