package node

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestProbeSeed: a worker that finds no learner at its seed says why: a
// host that does not resolve, nothing listening, a port that is not a
// learner's membership port, a learner of another cluster.name (it said
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
		{"another server", serve(http.StatusNotFound, "no"), "probe", "answers HTTP 404: not a learner's membership port"},
		{"not JSON", serve(http.StatusOK, "<html>"), "probe", "answers, but not as a learner's membership port"},
		{"a member without the learner", serve(http.StatusOK, `{"id":"x","cluster_name":"probe","kinds":[]}`), "probe", `a member of cluster "probe" without its learner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ProbeSeed(context.Background(), tc.seed, tc.cluster)
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
