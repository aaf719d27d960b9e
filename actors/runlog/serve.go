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
// page loads again.
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

// pageHandler serves the live page of the runs in dirs (see Serve).
func pageHandler(dirs []string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		runs, err := loadRuns(dirs)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(renderPage(runs, true))
	})
	run := func(r *http.Request) (string, bool) {
		i, err := strconv.Atoi(r.PathValue("run"))
		if err != nil || i < 0 || i >= len(dirs) {
			return "", false
		}
		return dirs[i], true
	}
	for name, file := range map[string]string{"metrics": MetricsFile, "warm": WarmStartFile} {
		mux.HandleFunc("GET /run/{run}/"+name, func(w http.ResponseWriter, r *http.Request) {
			dir, ok := run(r)
			off, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
			if !ok || err != nil || off < 0 {
				http.Error(w, "want /run/I/"+name+"?offset=N", http.StatusBadRequest)
				return
			}
			serveTail(w, filepath.Join(dir, file), off)
		})
	}
	mux.HandleFunc("GET /run/{run}/samples", func(w http.ResponseWriter, r *http.Request) {
		dir, ok := run(r)
		after, err := strconv.Atoi(r.URL.Query().Get("after"))
		if !ok || err != nil {
			http.Error(w, "want /run/I/samples?after=STEP", http.StatusBadRequest)
			return
		}
		serveSamples(w, dir, after)
	})
	return mux
}

// serveTail writes the complete lines of path from byte off, and the
// offset after them in X-Next-Offset.
func serveTail(w http.ResponseWriter, path string, off int64) {
	data, err := readFrom(path, off)
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
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Next-Offset", strconv.FormatInt(off+int64(len(data)), 10))
	w.Write(data)
}

// serveSamples writes the sample tables of dir's steps after `after`
// (appendSamples' JSON).
func serveSamples(w http.ResponseWriter, dir string, after int) {
	steps, err := sampleSteps(dir, after)
	if err == nil {
		var samples []pageSamples
		if samples, err = readSamples(dir, steps); err == nil {
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
