package runlog

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/rewards"
)

func TestFormatProgress(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		s    ProgressStats
		want string
	}{
		{"the issue's example", ProgressStats{Step: 120, Total: 200, Reward: 0.4123, Accuracy: 0.381, Tau: 0.5, Beta: 0, TokensPerSec: 5300, ETA: 72 * time.Second},
			"step 120/200 | reward 0.412 | acc 38.1% | tau 0.50 | beta 0.000 | 5.3k tok/s | ETA 1m12s"},
		{"unknowns", ProgressStats{Step: 3, Reward: nan, Accuracy: nan, Tau: nan, Beta: math.Inf(1), TokensPerSec: nan, ETA: -1},
			"step 3 | reward - | acc - | tau - | beta - | - tok/s | ETA -"},
	}
	for _, tc := range tests {
		if got := FormatProgress(tc.s); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0 tok/s"}, {812.4, "812 tok/s"}, {999.4, "999 tok/s"}, {999.6, "1.0k tok/s"},
		{5300, "5.3k tok/s"}, {123456, "123.5k tok/s"}, {1.25e6, "1.2M tok/s"},
		{-1, "- tok/s"}, {math.NaN(), "- tok/s"},
	}
	for _, tc := range tests {
		if got := FormatRate(tc.in); got != tc.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormatETA(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"}, {1400 * time.Millisecond, "1s"}, {59 * time.Second, "59s"}, {60 * time.Second, "1m00s"},
		{72 * time.Second, "1m12s"}, {3599 * time.Second, "59m59s"}, {2*time.Hour + 3*time.Minute + 5*time.Second, "2h03m"},
		{-time.Second, "-"},
	}
	for _, tc := range tests {
		if got := FormatETA(tc.in); got != tc.want {
			t.Errorf("FormatETA(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestProgressETAFromEMA(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, 1)
	stats := func(step int) ProgressStats {
		return ProgressStats{Step: step, Total: 12, Reward: 1, Accuracy: 1, Tau: 1, Beta: 1, TokensPerSec: 1}
	}
	p.Update(stats(1), 2*time.Second) // EMA 2 s, 11 steps left: 22 s
	// EMA = 0.1·4 + 0.9·2 = 2.2 s; 10 steps left: 22 s.
	line := p.Update(stats(2), 4*time.Second)
	if !strings.HasSuffix(line, "ETA 22s") {
		t.Errorf("line = %q, want ETA 22s", line)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "ETA 22s") {
		t.Errorf("output = %q, want 2 lines", buf.String())
	}
}

func TestProgressEveryN(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, 5)
	for s := 1; s <= 12; s++ {
		p.Update(ProgressStats{Step: s, Total: 12}, time.Second)
	}
	p.Done()
	var steps []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		steps = append(steps, strings.Fields(l)[1])
	}
	// every 5th step, and the last one.
	if got := strings.Join(steps, " "); got != "5/12 10/12 12/12" {
		t.Errorf("printed steps %q, want 5/12 10/12 12/12", got)
	}
}

func TestProgressTerminalRewrites(t *testing.T) {
	p := &Progress{w: new(bytes.Buffer), tty: true, every: 1}
	buf := p.w.(*bytes.Buffer)
	p.Update(ProgressStats{Step: 1, Total: 1000, TokensPerSec: 123456}, time.Hour)
	first := buf.Len()
	p.Update(ProgressStats{Step: 2, Total: 1000, TokensPerSec: 1}, time.Second)
	p.Done()
	out := buf.String()
	if strings.Count(out, "\r") != 2 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("terminal output %q: want two \\r-rewrites and one final newline", out)
	}
	// The shorter second line is padded to cover the first.
	if second := len(out) - first - 1; second != first {
		t.Errorf("second write %d bytes, want %d (padded)", second, first)
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(new(bytes.Buffer)) {
		t.Error("bytes.Buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("regular file is a terminal")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if IsTerminal(null) {
		t.Error("/dev/null (a character device) is a terminal")
	}
}

func TestStatsFromMetrics(t *testing.T) {
	s := StatsFromMetrics(3, 10, map[string]float64{rewards.KeyReward: 0.5, rewards.KeyTau: 0.25, KeyTokensPerSec: 900})
	if s.Step != 3 || s.Total != 10 || s.Reward != 0.5 || s.Tau != 0.25 || s.TokensPerSec != 900 ||
		!math.IsNaN(s.Accuracy) || !math.IsNaN(s.Beta) || s.ETA >= 0 {
		t.Errorf("stats = %+v", s)
	}
}

// TestProgressBusy: a busy line takes the place of the terminal's progress
// line (padded over it, and the next step's line over it in turn), and is
// a line of its own elsewhere; Busy and Update may come from two
// goroutines.
func TestProgressBusy(t *testing.T) {
	term := &Progress{w: new(bytes.Buffer), tty: true, every: 1}
	buf := term.w.(*bytes.Buffer)
	step := term.Update(ProgressStats{Step: 1, Total: 10}, time.Second)
	term.Busy("step 2/10 running for 5s")
	next := term.Update(ProgressStats{Step: 2, Total: 10}, time.Second)
	busy := "step 2/10 running for 5s"
	want := "\r" + step + "\r" + busy + strings.Repeat(" ", len(step)-len(busy)) + "\r" + next + strings.Repeat(" ", max(len(busy)-len(next), 0))
	if got := buf.String(); got != want {
		t.Errorf("terminal output %q, want %q (step 2's line over the busy line)", buf.String(), want)
	}

	var log bytes.Buffer
	p := NewProgress(&log, 5)
	p.Busy("step 1/10 running for 1m00s")
	if log.String() != "step 1/10 running for 1m00s\n" {
		t.Errorf("log output %q, want the busy line on a line of its own", log.String())
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			p.Busy("busy")
		}
	}()
	for s := range 100 {
		p.Update(ProgressStats{Step: s + 1, Total: 100}, time.Millisecond)
	}
	<-done
	if n := strings.Count(log.String(), "busy\n"); n != 100 {
		t.Errorf("%d busy lines of 100", n)
	}
}

// TestProgressEndBusy: EndBusy blanks a terminal's busy line, leaves a
// step's line on screen, and does nothing to a log.
func TestProgressEndBusy(t *testing.T) {
	term := &Progress{w: new(bytes.Buffer), tty: true, every: 1}
	buf := term.w.(*bytes.Buffer)
	term.Update(ProgressStats{Step: 1, Total: 2}, time.Second)
	before := buf.String()
	term.EndBusy()
	if buf.String() != before {
		t.Errorf("EndBusy over a step's line wrote %q", strings.TrimPrefix(buf.String(), before))
	}
	term.Busy("final evaluation running for 5s: greedy decoding")
	before = buf.String()
	term.EndBusy()
	if got, want := strings.TrimPrefix(buf.String(), before), "\r"+strings.Repeat(" ", len("final evaluation running for 5s: greedy decoding"))+"\r"; got != want {
		t.Errorf("EndBusy over a busy line wrote %q, want %q", got, want)
	}
	var log bytes.Buffer
	p := NewProgress(&log, 1)
	p.Busy("busy")
	p.EndBusy()
	if log.String() != "busy\n" {
		t.Errorf("log output %q, want the busy line alone", log.String())
	}
}
