package node

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// panicky is a Remoting server whose every method panics, as proto.actor's
// ListProcesses and GetProcessDiagnostics do; Receive reads one message
// first, so that vetting comes before its panic.
type panicky struct {
	remote.UnimplementedRemotingServer
}

func (panicky) Receive(s remote.Remoting_ReceiveServer) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	panic("implement me")
}

func (panicky) ListProcesses(context.Context, *remote.ListProcessesRequest) (*remote.ListProcessesResponse, error) {
	panic("implement me")
}

func (panicky) GetProcessDiagnostics(context.Context, *remote.GetProcessDiagnosticsRequest) (*remote.GetProcessDiagnosticsResponse, error) {
	panic("implement me")
}

// guarded serves panicky behind the guard and returns a client connection.
func guarded(t *testing.T, notes *lockedBuffer) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(guard{newNotices(notes)}.serverOptions()...)
	remote.RegisterRemotingServer(s, panicky{})
	go s.Serve(l)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestGuard: every unary method and any unknown method answer
// Unimplemented without running a handler; a batch proto.actor's reader
// would index out of range with, or that stops an actor, ends the stream
// with InvalidArgument; a panic in the stream's handler is an Internal
// error and one notice naming the peer. The server stays up throughout.
func TestGuard(t *testing.T) {
	var notes lockedBuffer
	conn := guarded(t, &notes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := remote.NewRemotingClient(conn)
	if _, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := c.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
	for _, m := range []string{"/remote.Remoting/Nope", "/no.Such/Service"} {
		if err := conn.Invoke(ctx, m, &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v, want Unimplemented", m, err)
		}
	}
	batch := func(b *remote.MessageBatch) *remote.RemoteMessage {
		return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
	}
	pid := &actor.PID{Address: "127.0.0.1:1", Id: "coordinator"}
	streams := []struct {
		name string
		msg  *remote.RemoteMessage
		code codes.Code
	}{
		{"target out of range", batch(&remote.MessageBatch{TypeNames: []string{"x"}, Envelopes: []*remote.MessageEnvelope{{Target: 3}}}), codes.InvalidArgument},
		{"stop", batch(&remote.MessageBatch{TypeNames: []string{"actor.Stop"}, Targets: []*actor.PID{pid}, Envelopes: []*remote.MessageEnvelope{{}}}), codes.InvalidArgument},
		{"handler panics", &remote.RemoteMessage{}, codes.Internal},
	}
	for _, tc := range streams {
		s, err := c.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(tc.msg); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
		if _, err := s.Recv(); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	for _, want := range []string{"refused a message batch from 127.0.0.1:", "target 3 of 0",
		"recovered a panic in /remote.Remoting/Receive called by 127.0.0.1:"} {
		if !strings.Contains(notes.String(), want) {
			t.Errorf("notices lack %q:\n%s", want, notes.String())
		}
	}
	if strings.Contains(notes.String(), "actor.Stop") {
		t.Errorf("a second batch refusal from one peer within a minute was printed:\n%s", notes.String())
	}
}

// TestVetBatch: the checks of each envelope index, the serializer and the
// forbidden types.
func TestVetBatch(t *testing.T) {
	pid := &actor.PID{Address: "a:1", Id: "x"}
	ok := func() *remote.MessageBatch {
		return &remote.MessageBatch{TypeNames: []string{"messages.JoinRequest"}, Targets: []*actor.PID{pid}, Senders: []*actor.PID{pid},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 1}}}
	}
	tests := []struct {
		name  string
		edit  func(b *remote.MessageBatch)
		wants string // "" = fine
	}{
		{"fine", func(*remote.MessageBatch) {}, ""},
		{"no sender", func(b *remote.MessageBatch) { b.Envelopes[0].Sender = 0 }, ""},
		{"type", func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = 1 }, "type 1 of 1"},
		{"negative type", func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = -1 }, "type -1"},
		{"target", func(b *remote.MessageBatch) { b.Envelopes[0].Target = 1 }, "target 1 of 1"},
		{"sender", func(b *remote.MessageBatch) { b.Envelopes[0].Sender = 2 }, "sender 2 of 1"},
		{"serializer", func(b *remote.MessageBatch) { b.Envelopes[0].SerializerId = 7 }, "serializer 7"},
		{"poison", func(b *remote.MessageBatch) { b.TypeNames[0] = "actor.PoisonPill" }, "actor.PoisonPill"},
	}
	for _, tc := range tests {
		b := ok()
		tc.edit(b)
		err := vetBatch(b)
		if (tc.wants == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wants)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wants)
		}
	}
	if err := vetBatch(nil); err != nil {
		t.Errorf("no batch: %v", err)
	}
}

// TestNotices: one line per peer host and kind a minute; another kind or
// another host is said at once; a line that quotes a peer stays one line.
func TestNotices(t *testing.T) {
	var out lockedBuffer
	n := newNotices(&out)
	now := time.Unix(1000, 0)
	n.now = func() time.Time { return now }
	steps := []struct {
		peer, kind, text string
		after            time.Duration
		said             bool
	}{
		{"10.0.0.2:5000", "build", "a", 0, true},
		{"10.0.0.2:5001", "build", "b", time.Second, false}, // same host, another port
		{"10.0.0.2:5001", "certificate", "c", 0, true},
		{"10.0.0.3:5000", "build", "d", 0, true},
		{"10.0.0.2:5002", "build", "e", noticeEvery, true},
		{"[::1]:5002", "build", "two\nlines", 0, true},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if got := n.say(s.peer, s.kind, "%s", s.text); got != s.said {
			t.Errorf("step %d (%s %s): said %v, want %v", i, s.peer, s.kind, got, s.said)
		}
	}
	if got, want := out.String(), "a\nc\nd\ne\ntwo lines\n"; got != want {
		t.Errorf("notices %q, want %q", got, want)
	}
	if long := oneLine(strings.Repeat("é", maxNoticeLine)); len(long) > maxNoticeLine+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("a long notice is %d bytes", len(long))
	}
}

// TestAdvertised: a given address wins; a host is advertised as itself; a
// wildcard host advertises this machine's first IPv4 address that is not
// loopback, else its IPv6 one, else says to set cluster.advertise.
func TestAdvertised(t *testing.T) {
	nets := func(cidrs ...string) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) {
			var out []net.Addr
			for _, c := range cidrs {
				ip, n, _ := net.ParseCIDR(c)
				n.IP = ip
				out = append(out, n)
			}
			return out, nil
		}
	}
	machine := nets("127.0.0.1/8", "::1/128", "fe80::1/64", "2001:db8::7/64", "192.0.2.2/24")
	tests := []struct {
		host, advertise string
		addrs           func() ([]net.Addr, error)
		want            string // host:port, or "error"
	}{
		{"127.0.0.1", "", machine, "127.0.0.1:7000"},
		{"10.0.0.1", "", machine, "10.0.0.1:7000"},
		{"0.0.0.0", "", machine, "192.0.2.2:7000"},
		{"::", "", machine, "192.0.2.2:7000"},
		{"[::]", "", machine, "192.0.2.2:7000"},
		{"0.0.0.0", "", nets("127.0.0.1/8", "fe80::1/64", "2001:db8::7/64"), "[2001:db8::7]:7000"},
		{"0.0.0.0", "", nets("127.0.0.1/8", "::1/128"), "error"},
		{"0.0.0.0", "learner.example", machine, "learner.example:7000"},
		{"0.0.0.0", "203.0.113.9:443", machine, "203.0.113.9:443"},
		{"0.0.0.0", "2001:db8::9", machine, "[2001:db8::9]:7000"},
		{"0.0.0.0", "203.0.113.9:0", machine, "error"},
	}
	for _, tc := range tests {
		h, p, err := advertised(tc.host, 7000, tc.advertise, tc.addrs)
		got := "error"
		if err == nil {
			got = net.JoinHostPort(h, strconv.Itoa(p))
		}
		if got != tc.want {
			t.Errorf("advertised(%q, 7000, %q) = %s (%v), want %s", tc.host, tc.advertise, got, err, tc.want)
		}
	}
}
