package actors

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/gpu"
)

func TestBusyLine(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		n     int64
		total int64
		a     activity
		parts partsInFlight
		want  string
	}{
		{"making, parts back", 5, 10, activity{making, now.Add(-65 * time.Second)}, partsInFlight{total: 2, back: 1},
			"step 6/10 running for 1m05s: making its batch (generation, rewards, reference log-probs), 1 of 2 parts back"},
		{"making, waiting for a worker", 0, 10, activity{making, now.Add(-5 * time.Second)}, partsInFlight{total: 2, waiting: 2},
			"step 1/10 running for 5s: making its batch (generation, rewards, reference log-probs), 0 of 2 parts back, 2 waiting for a stage actor (a worker node to join, or one to be free)"},
		{"making, parts unknown", 2, 10, activity{making, now.Add(-time.Minute)}, partsInFlight{},
			"step 3/10 running for 1m00s: making its batch (generation, rewards, reference log-probs)"},
		{"learning, total unknown", 41, 0, activity{learning, now.Add(-2 * time.Hour)},
			partsInFlight{total: 2, back: 2}, "step 42 running for 2h00m: learning from its batch"},
	}
	for _, tc := range tests {
		if got := busyLine(tc.n, tc.total, tc.a, tc.parts, now); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestOldestStepInFlight(t *testing.T) {
	tr := &Trainer{active: map[int64]activity{}}
	if _, _, ok := tr.oldest(); ok {
		t.Fatal("a step in flight before any began")
	}
	tr.doing(4, making)
	tr.doing(3, making)
	since := tr.active[3].since
	tr.doing(3, learning)
	n, a, ok := tr.oldest()
	if !ok || n != 3 || a.phase != learning || !a.since.Equal(since) {
		t.Errorf("oldest = step %d %+v (%v), want step 3 learning since it began making its batch", n, a, ok)
	}
	tr.done(3)
	if n, a, _ := tr.oldest(); n != 4 || a.phase != making {
		t.Errorf("after step 3: oldest = step %d %+v, want step 4 making", n, a)
	}
}

// gatedSampler samples once open is closed.
type gatedSampler struct {
	Sampler
	open chan struct{}
}

func (g gatedSampler) Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	<-g.open
	return g.Sampler.Sample(prompts, n, opt)
}

// TestWatchStepsSaysWhatAStepDoes: while a step's part is out (held by a
// generator, or waiting for one as on a learner whose worker nodes have
// not joined), the watch prints what the step is doing, with the parts the
// coordinator has out, and prints nothing once stopped.
func TestWatchStepsSaysWhatAStepDoes(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	making := `^step 1/3 running for 0s: making its batch \(generation, rewards, reference log-probs\), 0 of 1 parts back`
	noGenerator := s.pipeline
	noGenerator.Generators = 0
	for _, tc := range []struct {
		name string
		opt  PipelineOptions
		want string
	}{
		{"a generator holds the part", s.pipeline, making + "$"},
		{"no generator yet", noGenerator, making + `, 1 waiting for a stage actor \(a worker node to join, or one to be free\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testModels(t, s)
			open := make(chan struct{})
			m.Policy = gatedSampler{m.Policy, open}
			p := StartPipeline(s, testEnv(), m, testControl(s), tc.opt, nil)
			defer p.Stop()
			out := &syncBuffer{}
			r := &runner{trainer: p.Trainer, progress: runlog.NewProgress(out, 1)}
			stop := r.watchSteps(context.Background(), 3, 20*time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			stepped := make(chan error)
			go func() {
				_, err := Step(ctx, p.Trainer, 0, inOrder)
				stepped <- err
			}()
			line := regexp.MustCompile(`(?m)` + tc.want)
			for deadline := time.Now().Add(10 * time.Second); !line.MatchString(out.String()); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no line %s in 10 s; output:\n%s", tc.want, out.String())
				}
			}
			close(open)
			cancel() // the step without a generator ends here; the other has its part and ends with it
			<-stepped
			stop()
			printed := out.String()
			time.Sleep(100 * time.Millisecond)
			if after := strings.TrimPrefix(out.String(), printed); after != "" {
				t.Errorf("printed after the watch stopped: %q", after)
			}
		})
	}
}

// TestWatchEndSaysWhatTheEndDoes: nothing shows before the run's end
// begins a chore; once one has run for the interval its line shows, and
// none after the watch stops (which may be asked twice).
func TestWatchEndSaysWhatTheEndDoes(t *testing.T) {
	out := &syncBuffer{}
	r := &runner{progress: runlog.NewProgress(out, 1)}
	stop := r.watchEnd(context.Background(), 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if out.String() != "" {
		t.Fatalf("printed before a chore began: %q", out.String())
	}
	r.beginChore("final evaluation", "greedy decoding of up to 256 held-out problems by the policy after step 12")
	want := "final evaluation running for 0s: greedy decoding of up to 256 held-out problems by the policy after step 12\n"
	for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(out.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line %q in 10 s; output %q", want, out.String())
		}
	}
	stop()
	stop()
	printed := out.String()
	time.Sleep(100 * time.Millisecond)
	if after := strings.TrimPrefix(out.String(), printed); after != "" {
		t.Errorf("printed after the watch stopped: %q", after)
	}
}
