package actors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// tbEvent is one summary event as runlog/tensorboard/testdata/read_events.py
// prints it.
type tbEvent struct {
	Step    int64              `json:"step"`
	Scalars map[string]float64 `json:"scalars"`
}

// readTensorBoard reads every event file of a run's tensorboard/ with the
// independent reader of runlog/tensorboard's test (Google's protobuf
// runtime and the crc32c package, from Debian) and returns the summary
// events in step order. It skips the test when the reader's packages are
// not installed (make deps installs them).
func readTensorBoard(t *testing.T, run string) []tbEvent {
	t.Helper()
	const python, testdata = "/usr/bin/python3", "runlog/tensorboard/testdata"
	if err := exec.Command(python, "-c", "import google.protobuf, crc32c").Run(); err != nil {
		t.Skip("Debian's python3-protobuf and python3-crc32c are not installed (make deps installs them)")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (make deps installs protobuf-compiler)")
	}
	pb2 := t.TempDir()
	if out, err := exec.Command("protoc", "--proto_path="+testdata, "--python_out="+pb2, "event.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(run, runlog.TensorBoardDir, "events.out.tfevents.*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no event files in %s (%v)", filepath.Join(run, runlog.TensorBoardDir), err)
	}
	var events []tbEvent
	for _, f := range files {
		out, err := exec.Command(python, filepath.Join(testdata, "read_events.py"), pb2, f).CombinedOutput()
		if err != nil {
			t.Fatalf("read_events.py %s: %v\n%s", f, err, out)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e tbEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("reader output %q: %v", sc.Text(), err)
			}
			if e.Scalars != nil {
				events = append(events, e)
			}
		}
	}
	slices.SortStableFunc(events, func(a, b tbEvent) int { return int(a.Step - b.Step) })
	return events
}

// sameAsMetrics requires the run's TensorBoard events to hold the steps,
// keys and values (as float32) of its metrics.jsonl, line for line.
func sameAsMetrics(t *testing.T, run string) {
	t.Helper()
	events := readTensorBoard(t, run)
	recs, err := runlog.ReadMetrics(filepath.Join(run, runlog.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(recs) {
		t.Fatalf("%d TensorBoard events, %d metrics lines", len(events), len(recs))
	}
	for i, r := range recs {
		e := events[i]
		if e.Step != int64(r.Step) || len(e.Scalars) != len(r.Values) {
			t.Fatalf("event %d: step %d with %d scalars; metrics line: step %d with %d values", i, e.Step, len(e.Scalars), r.Step, len(r.Values))
		}
		for k, v := range r.Values {
			if got, ok := e.Scalars[k]; !ok || float32(got) != float32(v) {
				t.Errorf("step %d: %s = %v (present %t) in TensorBoard, %v in metrics.jsonl", r.Step, k, got, ok, v)
			}
		}
	}
}

// twinkleKeys are the keys of twinkle's GRPOMetric (seed page 003) that
// the learner reports on every trained step.
var twinkleKeys = []string{"train/policy_confidence", "train/mean_new_logp", "train/mean_old_logp", "train/logp_diff_mean",
	"train/approx_kl", "train/token_kl_max", "train/token_ratio_max", "train/entropy",
	"train/clip_ratio", "train/clip_ratio_low", "train/clip_ratio_high"}

// everyStepHasTwinkleKeys requires every step line (line 0 aside) of the
// run's metrics.jsonl to carry the twinkle keys, each finite, with
// policy_confidence = exp(mean_new_logp) and clip_ratio = low + high.
func everyStepHasTwinkleKeys(t *testing.T, run string) {
	t.Helper()
	recs, err := runlog.ReadMetrics(filepath.Join(run, runlog.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[1:] {
		for _, k := range twinkleKeys {
			if _, ok := r.Values[k]; !ok {
				t.Errorf("step %d has no %s", r.Step, k)
			}
		}
		v := r.Values
		if math.Abs(v["train/policy_confidence"]-math.Exp(v["train/mean_new_logp"])) > 1e-12 ||
			v["train/clip_ratio"] != v["train/clip_ratio_low"]+v["train/clip_ratio_high"] || v["train/approx_kl"] < 0 {
			t.Errorf("step %d: twinkle keys do not fit their formulas: %v", r.Step, v)
		}
	}
}

// TestRunTensorBoard: a run with output.tensorboard writes its metrics
// lines, line 0 included, as TensorBoard events that an independent reader
// reads back with the same values; resumed from an earlier checkpoint (the
// last one removed, as a crash before it would leave the run), it cuts the
// events after that checkpoint and adds a file of its own, and the events
// still match metrics.jsonl.
func TestRunTensorBoard(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Output.TensorBoard = true })
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	sameAsMetrics(t, run) // so the twinkle keys below are TensorBoard scalars too
	everyStepHasTwinkleKeys(t, run)
	if recs, _ := runlog.ReadMetrics(filepath.Join(run, runlog.MetricsFile)); len(recs) != 5 || recs[0].Step != 0 {
		t.Fatalf("metrics lines %+v, want steps 0..4", recs)
	}
	if err := os.RemoveAll(filepath.Join(run, runlog.CheckpointsDir, "step-4")); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Steps, cfg.Train.Resume = 6, run
	out.Reset()
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	files, _ := filepath.Glob(filepath.Join(run, runlog.TensorBoardDir, "events.out.tfevents.*"))
	if len(files) != 2 {
		t.Errorf("event files %v, want the first run's and the resumed run's", files)
	}
	sameAsMetrics(t, run)
}

// scrapeSteps fetches the Prometheus endpoint at url and returns the
// trained-step counter and the names of the metrics on the page (and
// name{key=K} for each key label), parsed
// by the Prometheus client's own parser (ok false while nothing answers
// or the counter is not there yet).
func scrapeSteps(url string) (steps float64, names map[string]bool, ok bool) {
	res, err := http.Get(url)
	if err != nil {
		return 0, nil, false
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return 0, nil, false
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, nil, false
	}
	names = map[string]bool{}
	for name, fam := range fams {
		names[name] = true
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" {
					names[name+"{key="+l.GetValue()+"}"] = true
				}
			}
		}
	}
	for _, m := range fams["mgrpo_steps_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "trained" {
				return m.GetCounter().GetValue(), names, true
			}
		}
	}
	return 0, names, false
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader on other
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRunPrometheus: during a run with output.prometheus_port, the
// endpoint on cluster.host answers scrapes and its step counter advances
// (fetched, then fetched again until it has grown); the run is then
// interrupted, after which the endpoint is gone and the TensorBoard
// events, flushed and closed on the interrupt, match metrics.jsonl.
func TestRunPrometheus(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := runConfig(t, func(c *config.Config) {
		c.Train.WarmStartSteps, c.Train.Steps, c.Train.CheckpointEvery, c.Train.EvalEvery = 0, 100000, 0, 0
		c.Output.SampleEvery, c.Output.PrometheusPort, c.Output.TensorBoard = 0, port, true
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var out syncBuffer
	go func() { done <- Run(ctx, cfg, &out) }()
	var first, second float64
	var page map[string]bool
	for seen := 0; seen < 2; {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before its step counter was seen to advance (%v, %v)\n%s", err, first, second, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		n, p, ok := scrapeSteps(url)
		switch {
		case !ok || n == 0:
		case seen == 0:
			first, seen = n, 1
		case n > first:
			second, page, seen = n, p, 2
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run: %v, want ErrInterrupted\n%s", err, out.String())
	}
	t.Logf("mgrpo_steps_total: %v, then %v", first, second)
	for _, name := range []string{"mgrpo_step", "mgrpo_metric", "mgrpo_parts_total", "mgrpo_generated_tokens_total",
		"mgrpo_tokens_per_second", "mgrpo_queue_depth", "protoactor_actor_spawn_count_total", "target_info"} {
		if !page[name] {
			t.Errorf("the scrape during the run has no %s", name)
		}
	}
	for _, k := range twinkleKeys { // new report keys reach Prometheus with no code of their own
		if !page["mgrpo_metric{key="+k+"}"] {
			t.Errorf("the scrape during the run has no mgrpo_metric{key=%q}", k)
		}
	}
	if !strings.Contains(out.String(), "metrics for Prometheus at "+url) {
		t.Errorf("the run did not say where its metrics are:\n%s", out.String())
	}
	if _, _, ok := scrapeSteps(url); ok {
		t.Errorf("the endpoint still answers after the run")
	}
	sameAsMetrics(t, filepath.Join(cfg.Output.Dir, "run"))
}
