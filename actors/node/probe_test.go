package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProbeSeed: a worker that finds no learner at its seed says why: a
// host that does not resolve, nothing listening, a port that accepts and
// never answers (it said "context deadline exceeded"), a port that is not
// a learner's membership port, a learner of another cluster.name (it said
// only "waiting for a learner").
func TestProbeSeed(t *testing.T) {
	serve := func(status int, body string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://")
	}
	learner, err := Start(Options{Name: "probe", Host: "127.0.0.1", Port: freePortNumber(t), Learner: true, MaxMessageBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer learner.Stop()
	for _, tc := range []struct {
		name, seed, cluster, want string
	}{
		{"a learner", learner.Seed(), "probe", ""},
		{"another cluster", learner.Seed(), "mgrpo", `is a learner of cluster "probe", not "mgrpo": give both the same cluster.name`},
		{"nothing listening", closedPort(t), "probe", ": dial: connect: connection refused"},
		{"unknown host", "nosuchhost.invalid:6330", "probe", "nosuchhost.invalid"},
		{"no answer", silentPort(t), "probe", ": no answer within 2s"},
		{"another server", serve(http.StatusNotFound, "no"), "probe", "answers HTTP 404: not a learner's membership port"},
		{"not JSON", serve(http.StatusOK, "<html>"), "probe", "answers, but not as a learner's membership port"},
		{"a member without the learner", serve(http.StatusOK, `{"id":"x","cluster_name":"probe","kinds":[]}`), "probe", `a member of cluster "probe" without its learner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ProbeSeed(context.Background(), tc.seed, tc.cluster, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("ProbeSeed: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), tc.seed) {
				t.Errorf("ProbeSeed: %v, want an error naming %s and saying %q", err, tc.seed, tc.want)
			}
		})
	}
}

// TestUnreachable: a dial that finds no route or times out is told from
// a peer that refuses or hangs up, so that a worker can point at the
// learner's advertised address only when it is the likely cause.
func TestUnreachable(t *testing.T) {
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no route to host", dial(syscall.EHOSTUNREACH), true},
		{"network unreachable", dial(syscall.ENETUNREACH), true},
		{"timed out", dial(os.ErrDeadlineExceeded), true},
		{"refused", dial(syscall.ECONNREFUSED), false},
		{"reset", dial(syscall.ECONNRESET), false},
		{"closed", io.EOF, false},
		{"none", nil, false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNothingListens: a worker whose heartbeat went unanswered tells a
// learner that is gone (its port refuses connections) from one that is
// slow or frozen (its port accepts them), and a name that does not
// resolve is not a refusal.
func TestNothingListens(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		want       bool
	}{
		{"nothing listening", closedPort(t), true},
		{"accepts, never answers", silentPort(t), false},
		{"a node", startedNode(t), false},
		{"no such host", "no-such-host.invalid:6330", false},
	} {
		if got := NothingListens(tc.addr); got != tc.want {
			t.Errorf("%s (%s): NothingListens = %v, want %v", tc.name, tc.addr, got, tc.want)
		}
	}
}

// startedNode is the actor address of a plaintext node, stopped when the
// test ends.
func startedNode(t *testing.T) string {
	t.Helper()
	n, err := Start(Options{Name: "listens", Host: "127.0.0.1", Port: freePortNumber(t), MaxMessageBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n.Address()
}

// silentPort is a port on 127.0.0.1 that accepts connections and never
// answers, until the test ends.
func silentPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for c, err := l.Accept(); err == nil; c, err = l.Accept() {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// heldSeeds are membership-port stand-ins, one for each status: each
// holds every request it gets, after sending its index on arrived, until
// release, then answers with its status. in counts the requests held or
// being answered, and most is the largest count seen.
type heldSeeds struct {
	statuses []int
	addrs    []string
	arrived  chan int
	in, most atomic.Int64
	gate     chan struct{} // closed by release
	release  func()
}

// newHeldSeeds starts one held seed per status (see heldSeeds).
func newHeldSeeds(t *testing.T, statuses []int) *heldSeeds {
	h := &heldSeeds{statuses: statuses, arrived: make(chan int, 8*len(statuses)), gate: make(chan struct{})}
	var once sync.Once
	h.release = func() { once.Do(func() { close(h.gate) }) }
	for i, status := range statuses {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := h.in.Add(1)
			for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
			}
			h.arrived <- i
			<-h.gate
			h.in.Add(-1) // before the answer: the probe that gets it ends after
			w.WriteHeader(status)
		}))
		t.Cleanup(s.Close)
		h.addrs = append(h.addrs, strings.TrimPrefix(s.URL, "http://"))
	}
	t.Cleanup(h.release) // registered after the servers: runs before their Close
	return h
}

// check reports each answer that is not its seed's status, in the seeds'
// order.
func (h *heldSeeds) check(t *testing.T, errs []error) {
	t.Helper()
	if len(errs) != len(h.addrs) {
		t.Fatalf("%d answers for %d seeds", len(errs), len(h.addrs))
	}
	for i, err := range errs {
		want := fmt.Sprintf("%s answers HTTP %d", h.addrs[i], h.statuses[i])
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("seed %d: %v, want %q…", i, err, want)
		}
	}
}

// TestProbeSeedsAtOnce: a worker asks its seeds at once, so seeds that
// hang delay its waiting line by one probe's timeout, not one each (it
// asked them one after another, up to 2 s each). Every seed holds its
// request until all have one; asked one after another, all but the last
// would time out. The answers come back in the seeds' order.
func TestProbeSeedsAtOnce(t *testing.T) {
	h := newHeldSeeds(t, []int{http.StatusNotFound, http.StatusForbidden, http.StatusGone, http.StatusServiceUnavailable})
	done := make(chan []error, 1)
	go func() { done <- ProbeSeeds(context.Background(), h.addrs, "probe", nil) }()
	for range h.addrs {
		select {
		case <-h.arrived:
		case errs := <-done:
			t.Fatalf("ProbeSeeds ended (%v) before every seed had its request", errs)
		}
	}
	h.release()
	h.check(t, <-done)
}

// TestProbeSeedsBounded: no more than the limit of probes are in flight
// at once, however many seeds there are, and every seed is still asked,
// its answer in its place. With the limit of requests held, a further one
// arriving within a while is a probe past the limit; none arriving proves
// nothing, so the wait cannot fail a bounded ProbeSeeds on a slow machine.
func TestProbeSeedsBounded(t *testing.T) {
	const limit = 2
	h := newHeldSeeds(t, []int{http.StatusNotFound, http.StatusForbidden, http.StatusGone, http.StatusTeapot, http.StatusBadGateway})
	done := make(chan []error, 1)
	go func() { done <- probeSeeds(context.Background(), h.addrs, "probe", nil, limit) }()
	for range limit {
		<-h.arrived
	}
	select {
	case i := <-h.arrived:
		t.Errorf("seed %d asked while %d probes were held: more than %d in flight", i, limit, limit)
	case <-time.After(200 * time.Millisecond):
	}
	h.release()
	h.check(t, <-done)
	if most := h.most.Load(); most > limit {
		t.Errorf("%d probes in flight at once, want at most %d", most, limit)
	}
}
