package runlog_test

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
)

func ExampleDir_WriteTracedMetrics() {
	dir, _ := os.MkdirTemp("", "runs")
	defer os.RemoveAll(dir)
	d, _ := runlog.Create(dir, "example")
	d.WriteTracedMetrics(3, map[string]float64{"train/tau": 0.5, "train/kl": math.NaN()}, "4bf92f3577b34da6a3ce929d0e0e4736")
	d.Close()
	line, _ := os.ReadFile(d.MetricsPath())
	fmt.Print(string(line))
	// Output:
	// {"step":3,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","train/kl":null,"train/tau":0.5}
}

func ExampleFormatProgress() {
	fmt.Println(runlog.FormatProgress(runlog.ProgressStats{
		Step: 120, Total: 200, Reward: 0.412, Accuracy: 0.381, Tau: 0.5, Beta: 0,
		TokensPerSec: 5300, ETA: 72 * time.Second,
	}))
	// Output:
	// step 120/200 | reward 0.412 | acc 38.1% | tau 0.50 | beta 0.000 | 5.3k tok/s | ETA 1m12s
}
