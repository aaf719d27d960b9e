package runlog_test

import (
	"fmt"
	"math"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
)

func ExampleEncodeMetrics() {
	line, _ := runlog.EncodeMetrics(3, map[string]float64{"train/tau": 0.5, "train/kl": math.NaN()})
	fmt.Print(string(line))
	// Output:
	// {"step":3,"train/kl":null,"train/tau":0.5}
}

func ExampleFormatProgress() {
	fmt.Println(runlog.FormatProgress(runlog.ProgressStats{
		Step: 120, Total: 200, Reward: 0.412, Accuracy: 0.381, Tau: 0.5, Beta: 0,
		TokensPerSec: 5300, ETA: 72 * time.Second,
	}))
	// Output:
	// step 120/200 | reward 0.412 | acc 38.1% | tau 0.50 | beta 0.000 | 5.3k tok/s | ETA 1m12s
}
