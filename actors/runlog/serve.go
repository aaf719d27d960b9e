package runlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mgrpo/mgrpo/internal/connlimit"
)

// PageServer serves the live page of runs while they are written (Serve).
type PageServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr and serves the live page of the runs in runDirs.
// An address without a host (":8080") listens on 127.0.0.1 only; any other
// host must be given. GET / renders the page from the run's files as they
// are, and the page then polls for what was appended since, each poll
// reading only the new bytes:
//
//	/run/I/metrics?offset=N   run I's metrics.jsonl from byte N: its complete
//	                          lines, the offset after them in X-Next-Offset
//	/run/I/warm?offset=N      the same of warm_start.jsonl
//	/run/I/samples?after=S    the sample tables of steps after S, as JSON
//
// An offset past the end of a file (a resume cut it) is 409 Conflict: the
// page loads again. What one request may cost is bounded (maxTailBytes
// and the constants beside it).
func Serve(addr string, runDirs ...string) (*PageServer, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("serve %q: want HOST:PORT or :PORT", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &PageServer{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: pageHandler(runDirs), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}}
	go func() {
		defer close(s.done)
		s.srv.Serve(connlimit.New(connlimit.Limits{PerHost: maxPageConnsPerHost, Total: maxPageConns}.Scaled(8)).Listener(ln, nil)) // returns http.ErrServerClosed after Close
	}()
	return s, nil
}

// pageLimits bound the connections to the run page: browsers open six or
// so each; a client that holds idle connections until the process runs out
// of descriptors has those over the limits closed as they come.
const (
	maxPageConnsPerHost = 32
	maxPageConns        = 128
)

// URL is the page's address, http://HOST:PORT/.
func (s *PageServer) URL() string { return "http://" + s.ln.Addr().String() + "/" }

// Loopback reports whether the server listens on a loopback address only.
func (s *PageServer) Loopback() bool {
	a, ok := s.ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// Close stops the server and waits for it.
func (s *PageServer) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Bounds on what one request may cost the process serving the page (the
// training process under output.serve), so that a client polling from
// offset 0 in a loop, or reloading the page, cannot take its memory or
// its cores: a poll answers at most maxTailBytes of a log (the page asks
// again for the rest) and the sample tables of at most maxSampleSteps
// steps; at most maxReads polls read files at once (the others wait their
// turn); the page is rendered by one request at a time, and a render is
// reused for pageReuse or for pageReuseRatio times as long as it took,
// whichever is longer.
const (
	maxTailBytes   = 4 << 20
	maxSampleSteps = 32
	maxReads       = 4
	pageReuse      = 2 * time.Second
	pageReuseRatio = 4
)

// pageLimits are those bounds, as a handler applies them.
type pageLimits struct {
	tailBytes   int64
	sampleSteps int
	reads       int
}

// pageHandler serves the live page of the runs in dirs (see Serve).
func pageHandler(dirs []string) http.Handler {
	lim := pageLimits{tailBytes: maxTailBytes, sampleSteps: maxSampleSteps, reads: maxReads}
	return newPageHandler(dirs, lim, func() ([]byte, error) {
		runs, err := loadRuns(dirs)
		if err != nil {
			return nil, err
		}
		return renderPage(runs, true), nil
	})
}

// newPageHandler serves the page render makes, and the polls of dirs,
// within lim.
func newPageHandler(dirs []string, lim pageLimits, render func() ([]byte, error)) http.Handler {
	mux := http.NewServeMux()
	page := &pageCache{render: render}
	reads := make(chan struct{}, lim.reads)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		data, err := page.get(time.Now)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(data)
	})
	run := func(r *http.Request) (string, bool) {
		i, err := strconv.Atoi(r.PathValue("run"))
		if err != nil || i < 0 || i >= len(dirs) {
			return "", false
		}
		return dirs[i], true
	}
	// read runs f while at most lim.reads requests read files; false when
	// the client left while it waited.
	read := func(r *http.Request, f func()) bool {
		select {
		case reads <- struct{}{}:
		case <-r.Context().Done():
			return false
		}
		defer func() { <-reads }()
		f()
		return true
	}
	for name, file := range map[string]string{"metrics": MetricsFile, "warm": WarmStartFile} {
		mux.HandleFunc("GET /run/{run}/"+name, func(w http.ResponseWriter, r *http.Request) {
			dir, ok := run(r)
			off, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
			if !ok || err != nil || off < 0 {
				http.Error(w, "want /run/I/"+name+"?offset=N", http.StatusBadRequest)
				return
			}
			read(r, func() { serveTail(w, filepath.Join(dir, file), off, lim.tailBytes) })
		})
	}
	mux.HandleFunc("GET /run/{run}/samples", func(w http.ResponseWriter, r *http.Request) {
		dir, ok := run(r)
		after, err := strconv.Atoi(r.URL.Query().Get("after"))
		if !ok || err != nil {
			http.Error(w, "want /run/I/samples?after=STEP", http.StatusBadRequest)
			return
		}
		read(r, func() { serveSamples(w, dir, after, lim.sampleSteps) })
	})
	return mux
}

// pageCache renders the page for one request at a time and hands the
// same render to the requests that come while it is fresh: for
// pageReuse, or pageReuseRatio times as long as it took to make (a long
// run's page takes seconds), whichever is longer. A render is a snapshot
// of the run's files with the offsets it read them to, so the page's
// polls take up where it ends.
type pageCache struct {
	render func() ([]byte, error)

	mu    sync.Mutex // held while rendering: requests meanwhile wait for its result
	page  []byte
	until time.Time // when page goes stale
}

// get returns the page, rendering it if the last render is stale.
func (c *pageCache) get(now func() time.Time) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := now()
	if c.page != nil && start.Before(c.until) {
		return c.page, nil
	}
	page, err := c.render()
	if err != nil {
		return nil, err
	}
	end := now()
	c.page, c.until = page, end.Add(max(pageReuse, pageReuseRatio*end.Sub(start)))
	return page, nil
}

// serveTail writes the complete lines of path from byte off, at most
// limit bytes of them, and the offset after them in X-Next-Offset (where
// the next poll begins).
func serveTail(w http.ResponseWriter, path string, off, limit int64) {
	data, err := readFrom(path, off, limit)
	switch {
	case errors.Is(err, errShrunk):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case errors.Is(err, fs.ErrNotExist) && off == 0:
		data = nil // not written yet
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	if end == 0 && int64(len(data)) == limit {
		http.Error(w, fmt.Sprintf("%s: a line at byte %d is longer than %d bytes", filepath.Base(path), off, limit), http.StatusInternalServerError)
		return
	}
	data = data[:end]
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Next-Offset", strconv.FormatInt(off+int64(len(data)), 10))
	w.Write(data)
}

// serveSamples writes the sample tables of dir's first steps after
// `after`, at most limit of them (appendSamples' JSON); the page asks for
// those after the last it got at its next poll.
func serveSamples(w http.ResponseWriter, dir string, after, limit int) {
	steps, err := sampleSteps(dir, after)
	if err == nil {
		var samples []pageSamples
		if samples, err = readSamples(dir, steps[:min(len(steps), limit)]); err == nil {
			var b bytes.Buffer
			appendSamples(&b, samples)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Write(b.Bytes())
			return
		}
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
