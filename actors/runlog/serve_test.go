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
	"testing"
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
