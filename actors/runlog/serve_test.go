package runlog

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// get fetches url and returns the status, the X-Next-Offset header and the
// body.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("X-Next-Offset"), string(body)
}

// TestServeTails: the page carries the lines written so far and where it
// stopped; a poll from there returns exactly the lines written since (a
// line still being written is left for the next poll), and sample tables
// after a step; an offset past the end is 409.
func TestServeTails(t *testing.T) {
	d := writeRun(t, t.TempDir(), "live", 2)
	s, err := Serve("127.0.0.1:0", d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, _, page := get(t, s.URL())
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	data := parsePage(t, []byte(page))
	if !data.Live || data.PollMS <= 0 || len(data.Runs[0].Metrics.Steps) != 3 {
		t.Fatalf("live %v, poll %d ms, steps %v", data.Live, data.PollMS, data.Runs[0].Metrics.Steps)
	}
	off := data.Runs[0].MetricsOffset
	url := func(off int64) string { return s.URL() + "run/0/metrics?offset=" + strconv.FormatInt(off, 10) }

	if _, next, body := get(t, url(off)); body != "" || next != strconv.FormatInt(off, 10) {
		t.Errorf("nothing new: body %q, next %s; want empty at %d", body, next, off)
	}
	writeStep(t, d, 3)
	writeStep(t, d, 4)
	f, err := os.OpenFile(d.MetricsPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"step":5,"train/rew`); err != nil { // cut short
		t.Fatal(err)
	}
	f.Close()
	_, next, body := get(t, url(off))
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"step":3,`) || !strings.HasPrefix(lines[1], `{"step":4,`) {
		t.Fatalf("tail after 2 steps = %q, want the lines of steps 3 and 4", body)
	}
	if n, _ := strconv.ParseInt(next, 10, 64); n != off+int64(len(body)) {
		t.Errorf("next offset %s, want %d", next, off+int64(len(body)))
	}
	if code, _, _ := get(t, url(1<<20)); code != http.StatusConflict {
		t.Errorf("offset past the end: %d, want 409", code)
	}
	checkSamplesAndWarm(t, s.URL(), data.Runs[0].WarmOffset)
	for _, path := range []string{"run/1/metrics?offset=0", "run/0/metrics?offset=-1", "run/0/metrics", "run/0/samples?after=x", "run/x/warm?offset=0"} {
		if code, _, _ := get(t, s.URL()+path); code != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", path, code)
		}
	}
	if code, _, _ := get(t, s.URL()+"checkpoints/"); code != http.StatusNotFound {
		t.Errorf("GET /checkpoints/ = %d, want 404: the server serves the page and its logs only", code)
	}
}

// checkSamplesAndWarm: the run at url serves the sample tables after step
// 2 (step 4's) and its warm start log, which ends at warmEnd.
func checkSamplesAndWarm(t *testing.T, url string, warmEnd int64) {
	t.Helper()
	_, _, samples := get(t, url+"run/0/samples?after=2")
	var tables []struct {
		Step int `json:"step"`
	}
	if err := json.Unmarshal([]byte(samples), &tables); err != nil || len(tables) != 1 || tables[0].Step != 4 {
		t.Errorf("samples after step 2 = %s (%v), want step 4's table", samples, err)
	}
	_, next, warm := get(t, url+"run/0/warm?offset=0")
	if strings.Count(warm, "\n") != 4 || next != strconv.FormatInt(warmEnd, 10) {
		t.Errorf("warm start log: %d lines, next %s", strings.Count(warm, "\n"), next)
	}
}

func TestServeAddress(t *testing.T) {
	d := writeRun(t, t.TempDir(), "addr", 1)
	s, err := Serve(":0", d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Loopback() || !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("an address without a host serves on %s, want 127.0.0.1", s.URL())
	}
	if _, err := Serve("8080", d.Path()); err == nil {
		t.Error("no error for an address without a colon")
	}
	if _, err := Serve(strings.TrimSuffix(strings.TrimPrefix(s.URL(), "http://"), "/"), d.Path()); err == nil {
		t.Error("no error for a port in use")
	}
}

// TestServeBeforeTheFirstLine: a run that has not written its warm start
// log yet polls it as empty, not as an error.
func TestServeBeforeTheFirstLine(t *testing.T) {
	d, err := Create(t.TempDir(), "fresh")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := httptest.NewServer(pageHandler([]string{d.Path()}))
	defer h.Close()
	for _, path := range []string{"/", "/run/0/warm?offset=0", "/run/0/metrics?offset=0", "/run/0/samples?after=-1"} {
		if code, _, body := get(t, h.URL+path); code != http.StatusOK {
			t.Errorf("GET %s = %d %s", path, code, body)
		}
	}
}

// BenchmarkServeTail is the server's side of one poll of a live page in
// a 3000-step run: one new metrics line (of the default recipe's 135
// keys), the warm-start log and the sample tables unchanged.
func BenchmarkServeTail(b *testing.B) {
	d := syntheticRun(b, b.TempDir(), 3000)
	h := pageHandler([]string{d.Path()})
	st, err := os.Stat(d.MetricsPath())
	if err != nil {
		b.Fatal(err)
	}
	recs, err := ReadMetrics(d.MetricsPath())
	if err != nil {
		b.Fatal(err)
	}
	last := recs[len(recs)-1]
	line, _ := encodeLine(last.Step, last.Values, "")
	off := st.Size() - int64(len(line)) // the last line is the new one
	wst, _ := os.Stat(d.Path() + "/" + WarmStartFile)
	paths := []string{fmt.Sprintf("/run/0/metrics?offset=%d", off), fmt.Sprintf("/run/0/warm?offset=%d", wst.Size()), "/run/0/samples?after=3000"}
	b.ResetTimer()
	for range b.N {
		for _, p := range paths {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
			if w.Code != http.StatusOK {
				b.Fatalf("%s: %d", p, w.Code)
			}
		}
	}
}

// TestServePollsBounded: a poll from offset 0 of a long run's log answers
// at most the limit's worth of whole lines, and following X-Next-Offset
// reads the whole file in pieces; the sample tables come a limited number
// of steps at a time, the next ones after the last step received; a line
// longer than the limit is an error, not a poll that never moves on.
func TestServePollsBounded(t *testing.T) {
	d := syntheticRun(t, t.TempDir(), 60) // samples at steps 10, 20, ..., 60
	defer d.Close()
	lim := pageLimits{tailBytes: 12000, sampleSteps: 2, reads: 1}
	h := httptest.NewServer(newPageHandler([]string{d.Path()}, lim, func() ([]byte, error) { return nil, nil }))
	defer h.Close()
	want, err := os.ReadFile(d.MetricsPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 10*12000 {
		t.Fatalf("metrics.jsonl of %d bytes: too short to poll in pieces", len(want))
	}
	var got strings.Builder
	for off, polls := "0", 0; got.Len() < len(want); polls++ {
		code, next, body := get(t, h.URL+"/run/0/metrics?offset="+off)
		if code != http.StatusOK || len(body) > 12000 || !strings.HasSuffix(body, "\n") || polls > len(want) {
			t.Fatalf("poll at %s: %d, %d bytes (limit 12000), ends in a newline %t", off, code, len(body), strings.HasSuffix(body, "\n"))
		}
		got.WriteString(body)
		off = next
	}
	if got.String() != string(want) {
		t.Errorf("the polls read %d bytes unlike the file's %d", got.Len(), len(want))
	}
	var steps []int
	for after := -1; ; {
		code, _, body := get(t, h.URL+"/run/0/samples?after="+strconv.Itoa(after))
		var tables []struct{ Step int }
		if err := json.Unmarshal([]byte(body), &tables); code != http.StatusOK || err != nil || len(tables) > 2 {
			t.Fatalf("samples after %d: %d, %d tables (limit 2), %v", after, code, len(tables), err)
		}
		if len(tables) == 0 {
			break
		}
		for _, x := range tables {
			steps = append(steps, x.Step)
		}
		after = steps[len(steps)-1]
	}
	if fmt.Sprint(steps) != "[10 20 30 40 50 60]" {
		t.Errorf("sample steps polled %v, want [10 20 30 40 50 60]", steps)
	}
	lim.tailBytes = 100 // shorter than a line
	h2 := httptest.NewServer(newPageHandler([]string{d.Path()}, lim, func() ([]byte, error) { return nil, nil }))
	defer h2.Close()
	second := strconv.Itoa(strings.IndexByte(string(want), '\n') + 1) // the first line is short, the second 4 KB
	if code, _, body := get(t, h2.URL+"/run/0/metrics?offset="+second); code != http.StatusInternalServerError || !strings.Contains(body, "longer than 100 bytes") {
		t.Errorf("a line over the limit: %d %q", code, body)
	}
}

// TestPageRenderedOnce: requests for the page while it renders share that
// render, and it is reused while fresh: pageReuse, or pageReuseRatio times
// as long as it took.
func TestPageRenderedOnce(t *testing.T) {
	var renders atomic.Int32
	release := make(chan struct{})
	h := httptest.NewServer(newPageHandler(nil, pageLimits{reads: 1}, func() ([]byte, error) {
		renders.Add(1)
		<-release
		return []byte("page"), nil
	}))
	defer h.Close()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, body := get(t, h.URL+"/"); code != http.StatusOK || body != "page" {
				t.Errorf("GET /: %d %q", code, body)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the requests queue behind the first render
	close(release)
	wg.Wait()
	if n := renders.Load(); n != 1 {
		t.Errorf("16 requests rendered the page %d times, want 1", n)
	}

	var n int
	clock := time.Unix(0, 0)
	c := &pageCache{render: func() ([]byte, error) { n++; clock = clock.Add(time.Second); return []byte{byte(n)}, nil }}
	now := func() time.Time { return clock }
	for _, tc := range []struct {
		advance time.Duration
		renders int
	}{
		{0, 1},                            // the first request renders (1 s): fresh for 4 s
		{3 * time.Second, 1},              // reused
		{1 * time.Second, 2},              // stale: rendered again
		{pageReuseRatio * time.Second, 3}, // stale again
	} {
		clock = clock.Add(tc.advance)
		if _, err := c.get(now); err != nil || n != tc.renders {
			t.Errorf("after %v more: %d renders, want %d (%v)", tc.advance, n, tc.renders, err)
		}
	}
}
