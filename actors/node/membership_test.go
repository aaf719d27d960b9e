package node

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMembershipUnderTLS: a learner with mutual TLS serves its membership
// port under the same TLS. A plaintext request gets a refusal, not the
// learner's address and id (it used to get them, whatever the CA); a
// node of the cluster's CA finds the learner; one of another CA, with an
// expired certificate or without TLS is told why (ErrTLS) and the learner
// says so too, naming the port; a TLS node at a plaintext learner is told
// it does not use TLS, and the learner says that it does.
func TestMembershipUnderTLS(t *testing.T) {
	ours, theirs := certsIn(t), certsIn(t)
	now := time.Now()
	if err := AddNodeCert(ours, "expired", nil, now.Add(-48*time.Hour), now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var notes, plainNotes lockedBuffer
	learner, plain := serveMember(t, loadNode(t, ours, "node-1"), &notes), serveMember(t, nil, &plainNotes)

	resp, err := http.Get("http://" + learner + memberPath)
	if err != nil {
		t.Fatalf("plaintext request: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "learner-id") || strings.Contains(string(body), LearnerKind) {
		t.Errorf("a plaintext request to the TLS membership port: HTTP %d %q; want 400 and nothing of the learner", resp.StatusCode, body)
	}

	for _, tc := range []struct {
		name   string
		at     string // the membership port
		tls    *TLSConfigs
		want   string        // in the ErrTLS; "" for no error
		notes  *lockedBuffer // the learner's
		server string        // in its notices
	}{
		{"same CA", learner, loadNode(t, ours, "node-2"), "", &notes, ""},
		{"another CA", learner, loadNode(t, theirs, "node-2"), "signed by another CA", &notes, "to the membership port: it refuses this node's certificate"},
		{"expired", learner, loadNode(t, ours, "expired"), "it expired: valid until", &notes, `to the membership port: its certificate "mgrpo expired" is expired`},
		{"no TLS", learner, nil, "uses mutual TLS", &notes, "to the membership port: it does not speak TLS"},
		{"TLS at a plaintext learner", plain, loadNode(t, ours, "node-2"), "does not use TLS", &plainNotes, "it speaks TLS and this node does not"},
		{"plaintext", plain, nil, "", &plainNotes, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ProbeSeed(context.Background(), tc.at, "mtls", tc.tls)
			t.Logf("%v", err)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ProbeSeed: %v, want nil", err)
			case tc.want != "" && (!errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("ProbeSeed: %v, want ErrTLS in one line with %q", err, tc.want)
			}
			if tc.server != "" && !waitFor(tc.notes, tc.server) {
				t.Errorf("the learner's notices lack %q:\n%s", tc.server, tc.notes.String())
			}
		})
	}

	// Polling: a node of the CA finds the learner; one without TLS does not.
	for _, tc := range []struct {
		name  string
		tls   *TLSConfigs
		finds bool
	}{{"TLS worker", loadNode(t, ours, "node-2"), true}, {"plaintext worker", nil, false}} {
		members, ok := newMembership("mtls", []string{learner}, tc.tls, nil, nil, nil).poll()
		if ok != tc.finds || tc.finds && (len(members) != 1 || members[0].Address() != "127.0.0.1:4242") {
			t.Errorf("%s: polled %v (answered %v); want the learner at 127.0.0.1:4242: %v", tc.name, members, ok, tc.finds)
		}
	}
}

// serveMember serves the membership port of a learner with t's TLS (nil:
// plaintext), its notices to notes, until the test ends; it returns its
// address.
func serveMember(t *testing.T, tls *TLSConfigs, notes *lockedBuffer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := func() member {
		return member{ID: "learner-id", ClusterName: "mtls", Address: "127.0.0.1", Port: 4242, Kinds: []string{LearnerKind}}
	}
	m := newMembership("mtls", nil, tls, lis, self, newNotices(notes))
	go m.server.Serve(m.lis)
	t.Cleanup(func() { m.Shutdown(false) })
	return lis.Addr().String()
}

// TestMemberClientDialsDirectly: seeds are dialled directly whatever the
// environment's proxy settings say (proto.actor's poller went through
// HTTP_PROXY, which cannot reach a cluster's private addresses); the
// poller keeps its connection to a seed, a probe does not.
func TestMemberClientDialsDirectly(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	for _, keep := range []bool{true, false} {
		tr := memberClient(nil, keep).Transport.(*http.Transport)
		if tr.Proxy != nil || tr.DisableKeepAlives == keep {
			t.Errorf("memberClient(keep %v): a proxy %v, keep-alives off %v", keep, tr.Proxy != nil, tr.DisableKeepAlives)
		}
	}
}
