package runlog

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/mgrpo/mgrpo/rewards"
)

// Metric keys of a run besides the "train/..." ones (rewards.Key... and
// rewards.StepMetrics.Flatten spell those).
const (
	// KeyTokensPerSec is generation throughput, tokens per second of the step.
	KeyTokensPerSec = "perf/tokens_per_s"
	// TimePrefix starts the per-stage timing keys, "time/<stage>_s" in seconds.
	TimePrefix = "time/"
	// KeyStepTime is the wall time between the end of the previous step
	// and the end of this one, in seconds.
	KeyStepTime = TimePrefix + "step_s"
	// KeyEvalGreedyAccuracy is the greedy accuracy on held-out problems,
	// on the steps that evaluate.
	KeyEvalGreedyAccuracy = "eval/greedy_accuracy"
	// KeyWeightSyncBytes is the weight bytes sent over the network to
	// generators after the step (time/weight_sync_s is how long it took).
	KeyWeightSyncBytes = "perf/weight_sync_bytes"
	// KeyReissuedParts counts, since the run (or resume) started, the parts
	// of work sent again because the actor doing them was lost.
	KeyReissuedParts = "cluster/reissued_parts"
	// KeyHedgedParts counts, since the run (or resume) started, the parts
	// sent to a second node because they ran long on the first
	// (cluster.hedge).
	KeyHedgedParts = "cluster/hedged_parts"
	// KeyBadAnswers counts, since the run (or resume) started, the
	// answers of stage actors that failed their check (malformed: redone
	// elsewhere, or the step skipped).
	KeyBadAnswers = "cluster/bad_answers"
)

// etaAlpha is the weight of the newest step time in the exponential moving
// average used for the ETA: about the last 10 steps count.
const etaAlpha = 0.1

// ProgressStats is what one progress line shows. NaN values print as "-";
// a negative ETA or a Total <= 0 means unknown.
type ProgressStats struct {
	Step, Total  int
	Reward       float64
	Accuracy     float64 // fraction in [0, 1], printed as a percentage
	Tau, Beta    float64
	TokensPerSec float64
	ETA          time.Duration
}

// StatsFromMetrics picks the progress values of a step out of its metrics:
// reward, accuracy, tau, beta and KeyTokensPerSec (NaN when
// missing). ETA is left unknown.
func StatsFromMetrics(step, total int, m map[string]float64) ProgressStats {
	get := func(k string) float64 {
		if v, ok := m[k]; ok {
			return v
		}
		return math.NaN()
	}
	return ProgressStats{
		Step: step, Total: total,
		Reward: get(rewards.KeyReward), Accuracy: get(rewards.KeyAccuracy),
		Tau: get(rewards.KeyTau), Beta: get(rewards.KeyBeta),
		TokensPerSec: get(KeyTokensPerSec), ETA: -1,
	}
}

// FormatProgress renders one progress line, for example
//
//	step 120/200 | reward 0.412 | acc 38.1% | tau 0.50 | beta 0.000 | 5.3k tok/s | ETA 1m12s
func FormatProgress(s ProgressStats) string {
	step := fmt.Sprintf("step %d", s.Step)
	if s.Total > 0 {
		step = fmt.Sprintf("step %d/%d", s.Step, s.Total)
	}
	acc := "-"
	if isFinite(s.Accuracy) {
		acc = fmt.Sprintf("%.1f%%", 100*s.Accuracy)
	}
	return strings.Join([]string{
		step,
		"reward " + formatFixed(s.Reward, 3),
		"acc " + acc,
		"tau " + formatFixed(s.Tau, 2),
		"beta " + formatFixed(s.Beta, 3),
		FormatRate(s.TokensPerSec),
		"ETA " + FormatETA(s.ETA),
	}, " | ")
}

// formatFixed prints v with prec decimals, or "-" when v is not finite.
func formatFixed(v float64, prec int) string {
	if !isFinite(v) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// FormatRate prints a token rate with an SI suffix: "812 tok/s",
// "5.3k tok/s", "1.2M tok/s"; "- tok/s" when unknown or negative.
func FormatRate(tokPerSec float64) string {
	switch {
	case !isFinite(tokPerSec) || tokPerSec < 0:
		return "- tok/s"
	case tokPerSec < 999.5:
		return fmt.Sprintf("%.0f tok/s", tokPerSec)
	case tokPerSec < 999.5e3:
		return fmt.Sprintf("%.1fk tok/s", tokPerSec/1e3)
	default:
		return fmt.Sprintf("%.1fM tok/s", tokPerSec/1e6)
	}
}

// FormatETA prints a remaining time rounded to the second: "45s", "1m12s",
// "2h03m" (minutes once above an hour); "-" when negative (unknown).
func FormatETA(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, (s%3600)/60)
	}
}

// Progress prints the progress line of a run. On a terminal it rewrites one
// line in place with '\r'; otherwise it prints a full line every few steps
// and at the last step. The ETA is the remaining steps times an
// exponential moving average of the step times. It is safe for concurrent
// use: the steps' records and a watch of the step in flight (Busy) share it.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool
	every   int
	emaSec  float64 // EMA of seconds per step; 0 before the first update
	lastLen int     // length of the line on screen (terminal only)
	busy    bool    // the line on screen is Busy's (terminal only)
}

// NewProgress returns a Progress writing to w. every (minimum 1) is the
// step interval of printed lines when w is not a terminal.
func NewProgress(w io.Writer, every int) *Progress {
	return &Progress{w: w, tty: IsTerminal(w), every: max(every, 1)}
}

// Update records that step s.Step took stepTime, fills in s.ETA when the
// total is known, and prints the line if due. It returns the line.
func (p *Progress) Update(s ProgressStats, stepTime time.Duration) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	dt := stepTime.Seconds()
	if p.emaSec == 0 {
		p.emaSec = dt
	} else {
		p.emaSec = etaAlpha*dt + (1-etaAlpha)*p.emaSec
	}
	s.ETA = -1
	if s.Total > 0 {
		s.ETA = time.Duration(p.emaSec * float64(max(s.Total-s.Step, 0)) * float64(time.Second))
	}
	line := FormatProgress(s)
	switch {
	case p.tty:
		p.rewrite(line)
	case s.Step%p.every == 0 || (s.Total > 0 && s.Step >= s.Total):
		fmt.Fprintln(p.w, line)
	}
	return line
}

// rewrite draws line over the terminal's progress line, padded to cover
// the one before.
func (p *Progress) rewrite(line string) {
	pad := strings.Repeat(" ", max(p.lastLen-len(line), 0))
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.lastLen, p.busy = len(line), false
}

// clear blanks the terminal's progress line and puts the cursor at its start.
func (p *Progress) clear() {
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.lastLen))
	p.lastLen, p.busy = 0, false
}

// Terminal reports whether the output is a terminal (its line rewritten in
// place).
func (p *Progress) Terminal() bool { return p.tty }

// Busy shows what a step that is taking long is doing: on a terminal in
// place of the progress line, which the step's Update draws again;
// otherwise on a line of its own (the caller says how often).
func (p *Progress) Busy(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.rewrite(line)
		p.busy = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// EndBusy blanks a terminal's line if Busy's is the one on screen, so that
// what is printed next starts on a clean line; a step's own line (Update)
// stays.
func (p *Progress) EndBusy() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.busy {
		p.clear()
	}
}

// Note prints line on a line of its own (a skipped or slow step): on a
// terminal it first clears the rewritten progress line, which the next
// Update draws again below it.
func (p *Progress) Note(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.lastLen > 0 {
		p.clear()
	}
	fmt.Fprintln(p.w, line)
}

// Done ends the rewritten line on a terminal with a newline.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.lastLen > 0 {
		fmt.Fprintln(p.w)
		p.lastLen, p.busy = 0, false
	}
}

// IsTerminal reports whether w writes to a terminal (not /dev/null, which
// is a character device too): an *os.File open on one, or a writer over
// one whose Fd method names its descriptor.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr }) // an *os.File, or a writer over one that says which
	return ok && isTerminal(f.Fd())
}

// isFinite reports whether v is neither NaN nor ±Inf.
func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
