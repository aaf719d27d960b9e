package tests

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/mgrpo/mgrpo/actors/node"
)

// The cluster as an attacker and an operator would try it (issue 27):
// calls no node makes, TLS nodes in the real order of events, refused
// certificates and builds. Each member is a separate OS process, as in
// cluster_test.go; the test process itself is the hostile client.

// certs writes a CA and n node certificates into dir/name and returns the
// directory.
func certs(t *testing.T, bin, dir, name string, n int) string {
	t.Helper()
	out := filepath.Join(dir, name)
	if p := start(t, bin, "certs", "certs", "--out", out, "--nodes", fmt.Sprint(n)); p.exit(t, time.Minute) != 0 {
		t.Fatalf("certs: %s", p.text())
	}
	return out
}

// tlsFlags are the cluster.tls flags of the certificate name (node-1, ...)
// of the CA in dir.
func tlsFlags(dir, name string) []string {
	return []string{"--cluster.tls.ca", filepath.Join(dir, "ca.pem"), "--cluster.tls.cert", filepath.Join(dir, name+".pem"),
		"--cluster.tls.key", filepath.Join(dir, name+".key")}
}

// streamCase is one message a hostile client sends on proto.actor's
// message stream, and the status the stream ends with (OK: it is
// answered, or ends cleanly when the client closes it).
type streamCase struct {
	name string
	msg  *remote.RemoteMessage
	code codes.Code
}

// hostileStreams are messages no node sends: each ends its stream with an
// error and leaves the node standing.
func hostileStreams() []streamCase {
	batch := func(types []string, targets []*actor.PID, e *remote.MessageEnvelope) *remote.RemoteMessage {
		return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
			TypeNames: types, Targets: targets, Envelopes: []*remote.MessageEnvelope{e}}}}
	}
	coord := []*actor.PID{{Address: "nowhere:1", Id: "coordinator"}}
	return []streamCase{
		{"connect", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "hostile", Address: "127.0.0.1:1"}}}}}, codes.OK},
		{"no message type", &remote.RemoteMessage{}, codes.OK},
		{"target out of range", batch([]string{"actor.PID"}, nil, &remote.MessageEnvelope{Target: 7}), codes.InvalidArgument},
		{"type out of range", batch(nil, coord, &remote.MessageEnvelope{TypeId: 3}), codes.InvalidArgument},
		{"sender out of range", batch([]string{"actor.PID"}, coord, &remote.MessageEnvelope{Sender: 2}), codes.InvalidArgument},
		{"serializer out of range", batch([]string{"actor.PID"}, coord, &remote.MessageEnvelope{SerializerId: 9}), codes.InvalidArgument},
		{"stop the coordinator", batch([]string{"actor.Stop"}, coord, &remote.MessageEnvelope{}), codes.InvalidArgument},
		{"poison the coordinator", batch([]string{"actor.PoisonPill"}, coord, &remote.MessageEnvelope{}), codes.InvalidArgument},
		// proto.actor's deserializer dereferences the type it did not find:
		// the panic is recovered.
		{"unknown type", batch([]string{"no.Such"}, coord, &remote.MessageEnvelope{}), codes.Internal},
		{"garbage body", batch([]string{"actor.PID"}, coord, &remote.MessageEnvelope{MessageData: []byte{0xff, 0xff, 0xff}}), codes.Unknown},
	}
}

// attack calls every method of proto.actor's Remoting service on the node
// at addr, and two that do not exist, as a peer with creds could: the
// unary methods (whose proto.actor handlers panic) and the made-up ones
// answer Unimplemented; the message stream works, and ends each message
// no node sends with an error.
func attack(t *testing.T, addr string, creds credentials.TransportCredentials) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := remote.NewRemotingClient(conn)
	if _, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("%s ListProcesses: %v, want Unimplemented", addr, err)
	}
	if _, err := c.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("%s GetProcessDiagnostics: %v, want Unimplemented", addr, err)
	}
	for _, m := range []string{"/remote.Remoting/Nope", "/mgrpo.Hostile/Call"} {
		if err := conn.Invoke(ctx, m, &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s %s: %v, want Unimplemented", addr, m, err)
		}
	}
	for _, tc := range hostileStreams() {
		if got := streamStatus(ctx, c, tc.msg); got != tc.code {
			t.Errorf("%s Receive, %s: stream ended %v, want %v", addr, tc.name, got, tc.code)
		}
	}
}

// attackWeights sends the learner's weight port what no node sends:
// garbage, a key too long, a request cut short (a fetch, and a wait for
// the next version), one for a key it does not serve (with certs: under mutual TLS with a certificate of the cluster's
// CA). Each ends its connection or is answered ErrNoBlob; the run goes on.
func attackWeights(t *testing.T, addr string, certs *node.TLSConfigs) {
	t.Helper()
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("weight port %s: %v", addr, err)
		}
		if certs == nil {
			return c
		}
		cfg := certs.Client.Clone()
		cfg.NextProtos = []string{"mgrpo-blobs/1"}
		return tls.Client(c, cfg)
	}
	for _, bad := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), []byte("MGB1\xff\xff"), []byte("MGB1\x00\x09weig"),
		[]byte("MGBA\x00\x07weights\x00\x09weig")} { // a wait for the next version, cut short
		c := dial()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		c.Write(bad)
		c.(interface{ CloseWrite() error }).CloseWrite() // a request cut short ends there
		if n, err := c.Read(make([]byte, 64)); n != 0 || err == nil {
			t.Errorf("weight port, %q: read %d bytes, %v; want the connection closed", bad, n, err)
		}
		c.Close()
	}
	client := node.NewBlobClient(certs)
	defer client.Close()
	err := client.Fetch(addr, "weights/none", 1<<20, 30*time.Second, func([]byte) error { return nil })
	if !errors.Is(err, node.ErrNoBlob) {
		t.Errorf("weight port, an unknown key: %v, want ErrNoBlob", err)
	}
}

// streamStatus sends msg on a new message stream, closes its sending side
// and returns the code the stream ends with (OK: ended cleanly).
func streamStatus(ctx context.Context, c remote.RemotingClient, msg *remote.RemoteMessage) codes.Code {
	s, err := c.Receive(ctx)
	if err != nil {
		return status.Code(err)
	}
	if err := s.Send(msg); err != nil && !errors.Is(err, io.EOF) {
		return status.Code(err)
	}
	s.CloseSend()
	for {
		if _, err := s.Recv(); errors.Is(err, io.EOF) {
			return codes.OK
		} else if err != nil {
			return status.Code(err)
		}
	}
}

// clusterFor starts a learner of a run of steps (with extra flags), a
// generator node and a reward+reference node (each with its own extra
// flags from workerFlags), and waits until both joined. It returns the
// learner, the generator node and their actor addresses.
func clusterFor(t *testing.T, bin, dir, name string, steps int, extra []string, workerFlags func(i int) []string) (learner, gen *proc, learnerAddr, weightsAddr, genAddr string) {
	t.Helper()
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner = start(t, bin, "learner", append(append(runFlags(dir, name, steps), "--role", "learner", "--cluster.port", strings.Split(seed, ":")[1]), extra...)...)
	m := learner.waitFor(t, `learner node: worker nodes join with --cluster.seeds \S+ \(actors at ([^,)]+), weights at ([^)]+)\)`, time.Minute)
	learnerAddr, weightsAddr = m[1], m[2]
	gen = start(t, bin, "gen", append([]string{"--role", "generator", "--cluster.seeds", seed}, workerFlags(2)...)...)
	genAddr = gen.waitFor(t, `node \S+: generator, actors at (\S+),`, time.Minute)[1]
	rr := start(t, bin, "reward+reference", append([]string{"--role", "reward,reference", "--cluster.seeds", seed}, workerFlags(3)...)...)
	gen.waitFor(t, `joined run`, 2*time.Minute)
	rr.waitFor(t, `joined run`, 2*time.Minute)
	return learner, gen, learnerAddr, weightsAddr, genAddr
}

// TestLongClusterHostileCalls: a client calls every method of the Remoting
// service (and made-up ones) on the learner and on a generator node while
// they train, in plaintext and under mutual TLS with a certificate of the
// cluster's CA: the calls are answered or refused with an error (the
// unary ones crashed every node with a stack trace), the nodes say so in
// a line naming the caller, and the run ends bit-identical to --role all.
func TestLongClusterHostileCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("long: two clusters of three processes")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 400
	want := allRun(t, bin, dir, steps)
	ca := certs(t, bin, dir, "certs", 4)
	tlsCfg, err := node.LoadTLS(filepath.Join(ca, "ca.pem"), filepath.Join(ca, "node-4.pem"), filepath.Join(ca, "node-4.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags func(i int) []string
		creds credentials.TransportCredentials
		certs *node.TLSConfigs // the hostile client's, on the weight port (nil: plaintext)
	}{
		{"plain", func(int) []string { return nil }, insecure.NewCredentials(), nil},
		{"tls", func(i int) []string { return tlsFlags(ca, fmt.Sprintf("node-%d", i)) }, credentials.NewTLS(tlsCfg.Client), tlsCfg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			learner, gen, learnerAddr, weightsAddr, genAddr := clusterFor(t, bin, dir, tc.name, steps, tc.flags(1), tc.flags)
			attack(t, learnerAddr, tc.creds)
			attack(t, genAddr, tc.creds)
			attackWeights(t, weightsAddr, tc.certs)
			learner.waitFor(t, `refused a blob request from 127\.0\.0\.1:\d+`, time.Minute)
			if strings.Contains(learner.text(), "done:") {
				t.Fatalf("the run ended before the attack did: give it more steps")
			}
			for _, p := range []*proc{learner, gen} {
				p.waitFor(t, `refused a message batch from 127\.0\.0\.1:\d+`, time.Minute)
				p.waitFor(t, `recovered a panic in /remote\.Remoting/Receive called by 127\.0\.0\.1:\d+`, time.Minute)
			}
			if code := learner.exit(t, 5*time.Minute); code != 0 {
				t.Fatalf("learner: exit %d\n%s", code, learner.text())
			}
			sameRun(t, filepath.Join(dir, tc.name), want, steps)
			for _, p := range []*proc{learner, gen} {
				if strings.Contains(p.text(), "goroutine ") || strings.Contains(p.text(), "panic:") {
					t.Errorf("%s printed a stack trace:\n%s", p.name, p.text())
				}
			}
		})
	}
}

// TestLongClusterTLSWorkerDuringWarmStart: TLS worker nodes started while
// the learner is in its warm start (its node up, its run not yet) wait
// for it and join (they exited 2: "refused this node's certificate … EOF").
// One of them starts before the learner, its first seed a learner of
// another CA: it names that seed while it waits, and joins the learner at
// its second seed (it exited 2 at the first).
func TestLongClusterTLSWorkerDuringWarmStart(t *testing.T) {
	if testing.Short() {
		t.Skip("long: three processes")
	}
	bin, dir := binary(t, ""), t.TempDir()
	ca, other := certs(t, bin, dir, "certs", 3), certs(t, bin, dir, "other", 1)
	seed, foreignSeed := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	foreign := start(t, bin, "foreign", append(append(runFlags(dir, "foreign", 4), "--role", "learner", "--cluster.port", strings.Split(foreignSeed, ":")[1],
		"--train.warm_start_steps", "0"), tlsFlags(other, "node-1")...)...) // waits for workers of its own CA
	foreign.waitFor(t, `learner node: worker nodes join with`, time.Minute)
	gen := start(t, bin, "gen", append([]string{"--role", "generator", "--cluster.seeds", foreignSeed + "," + seed}, tlsFlags(ca, "node-2")...)...)
	gen.waitFor(t, `waiting for a learner of cluster \S+ at .*`+regexp.QuoteMeta(foreignSeed)+`: its certificate .* is signed by another CA`, time.Minute)
	flags := append(runFlags(dir, "warm", 4), "--role", "learner", "--cluster.port", strings.Split(seed, ":")[1], "--train.warm_start_steps", "3000",
		"--optim.warm_start_lr", "1e-6") // too slow to reach the warm start's target: all 3000 steps, some 20 s
	learner := start(t, bin, "learner", append(flags, tlsFlags(ca, "node-1")...)...)
	learner.waitFor(t, `learner node: worker nodes join with`, time.Minute)
	rr := start(t, bin, "reward+reference", append([]string{"--role", "reward,reference", "--cluster.seeds", seed}, tlsFlags(ca, "node-3")...)...)
	for _, w := range []*proc{gen, rr} {
		w.waitFor(t, `the learner at \S+ does not answer yet`, time.Minute)
	}
	if strings.Contains(learner.text(), "warm start done") {
		t.Fatalf("the warm start ended before the workers asked to join: give it more steps\n%s", learner.text())
	}
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	for _, w := range []*proc{gen, rr} {
		if !strings.Contains(w.text(), "joined run") {
			t.Errorf("%s did not join:\n%s", w.name, w.text())
		}
	}
}

// TestLongClusterTLSLearnerRestart: a TLS learner killed (SIGKILL) after
// its step-20 checkpoint and resumed 30 s later, well past the
// membership refresh and the workers' heartbeats, gets its TLS workers
// back (they exited 2, reading "connection refused" as a certificate
// mismatch), and the run ends bit-identical to --role all. When the run is
// over, the workers keep waiting for the next learner.
func TestLongClusterTLSLearnerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("long: four processes, a restart and a 30 s absence")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 150
	every := []string{"--train.checkpoint_every", "10"}
	want := allRun(t, bin, dir, steps, every...)
	ca := certs(t, bin, dir, "certs", 3)
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	port := strings.Split(seed, ":")[1]
	learnerFlags := append(append([]string{"--role", "learner", "--cluster.port", port}, tlsFlags(ca, "node-1")...), every...)
	learner := start(t, bin, "learner", append(runFlags(dir, "cluster", steps), learnerFlags...)...)
	gen := start(t, bin, "generator", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(ca, "node-2")...)...)
	rr := start(t, bin, "reward+reference", append([]string{"--role", "reward,reference", "--cluster.seeds", seed}, tlsFlags(ca, "node-3")...)...)
	run := filepath.Join(dir, "cluster")
	waitFile(t, filepath.Join(run, "checkpoints", "step-20", "MANIFEST.sha256"), 2*time.Minute, learner)
	killed := time.Now()
	learner.signal(t, syscall.SIGKILL)
	learner.exit(t, time.Minute)
	if strings.Contains(learner.text(), "done:") {
		t.Fatalf("the run ended before the learner was killed: give it more steps")
	}
	// The learner stays away 30 s: each worker notices it is gone (a
	// heartbeat missed, and its port refuses connections) and says that
	// it does not answer (every 5 s).
	for _, w := range []*proc{gen, rr} {
		w.waitFor(t, `the learner at \S+ is gone \(nothing listens there any more\); waiting for a learner`, time.Minute)
	}
	unanswered(t, []*proc{gen, rr}, 1)
	time.Sleep(time.Until(killed.Add(30 * time.Second)))
	again := start(t, bin, "learner-again", append([]string{"--resume", run}, learnerFlags[:len(learnerFlags)-2]...)...)
	again.waitFor(t, `resumed from \S+ at step \d+`, time.Minute)
	if code := again.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("resumed learner: exit %d\n%s", code, again.text())
	}
	for _, w := range []*proc{gen, rr} {
		if n := strings.Count(w.text(), ": joined run "); n != 2 {
			t.Errorf("%s joined %d times, want 2 (before and after the restart):\n%s", w.name, n, w.text())
		}
	}
	sameRun(t, run, want, steps)
	// The run is over: the workers wait for the next one, under TLS too.
	for _, w := range []*proc{gen, rr} {
		w.waitForCount(t, `is gone \(nothing listens there any more\); waiting for a learner|dropped this node`, 2, time.Minute)
	}
	unanswered(t, []*proc{gen, rr}, 2)
}

// unanswered waits until each worker has said n more times, counted
// from now, that the learner does not answer yet: the workers wait out
// one absence together, not one after the other.
func unanswered(t *testing.T, workers []*proc, n int) {
	t.Helper()
	from := make([]int, len(workers))
	for i, w := range workers {
		from[i] = strings.Count(w.text(), "does not answer yet")
	}
	for i, w := range workers {
		w.waitForCount(t, `does not answer yet`, from[i]+n, time.Minute)
	}
}

// waitForCount waits until the output holds n matches of re, the process
// still running.
func (p *proc) waitForCount(t *testing.T, re string, n int, within time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(within); len(rx.FindAllStringIndex(p.text(), -1)) < n; time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %q %d times", p.name, p.err, re, n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed %q %d times within %v, want %d", p.name, re, len(rx.FindAllStringIndex(p.text(), -1)), within, n)
		}
	}
}

// waitFile waits until path exists; p is the process that should write it
// (its output is shown if it does not).
func waitFile(t *testing.T, path string, within time.Duration, p *proc) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v\n%s", path, within, p.text())
		}
	}
}

// TestLongClusterCertificateRefusals: worker nodes whose certificate is of
// another CA, expired, or not valid yet are each refused, and both sides
// say why in one line: the worker, exiting 2, and the learner, naming the
// peer (it said nothing; a certificate not valid yet read "expired …
// (signed by another CA?)"); a worker whose own certificate is expired or
// not valid yet says so at start too. The learner then trains with good
// nodes.
func TestLongClusterCertificateRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("long: several processes")
	}
	bin, dir := binary(t, ""), t.TempDir()
	ok, other := certs(t, bin, dir, "ok", 3), certs(t, bin, dir, "other", 1)
	now := time.Now()
	if err := node.AddNodeCert(ok, "expired", nil, now.Add(-48*time.Hour), now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := node.AddNodeCert(ok, "later", nil, now.Add(24*time.Hour), now.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner := start(t, bin, "learner", append(append(runFlags(dir, "tls", 4), "--role", "learner", "--cluster.port", strings.Split(seed, ":")[1]), tlsFlags(ok, "node-1")...)...)
	learner.waitFor(t, `learner node: worker nodes join with`, time.Minute)
	for _, tc := range []struct {
		name, ca, cert string
		worker         string // in the worker's one line
		learner        string // in the learner's line
		own            string // the worker's warning at start ("" none)
	}{
		{"another CA", other, "node-1", `its certificate "mgrpo node-1" is signed by another CA than this node's cluster.tls.ca`,
			`refused a connection from 127\.0\.0\.1:\d+( to the membership port)?: it refuses this node's certificate`, ""},
		{"expired", ok, "expired", `refused this node's certificate: it expired: valid until`,
			`refused a connection from 127\.0\.0\.1:\d+( to the membership port)?: its certificate "mgrpo expired" is expired: valid until`,
			`warning: cluster.tls.cert "mgrpo expired" is expired: valid until`},
		{"not valid yet", ok, "later", `refused this node's certificate: it is not valid yet: valid from`,
			`refused a connection from 127\.0\.0\.1:\d+( to the membership port)?: its certificate "mgrpo later" is not valid yet: valid from`,
			`warning: cluster.tls.cert "mgrpo later" is not valid yet: valid from`},
	} {
		w := start(t, bin, tc.name, append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(tc.ca, tc.cert)...)...)
		code := w.exit(t, 2*time.Minute)
		lines := strings.Split(strings.TrimSpace(w.text()), "\n")
		if last := lines[len(lines)-1]; code != 2 || !strings.Contains(last, tc.worker) {
			t.Errorf("%s: exit %d, last line %q; want exit 2 and %q", tc.name, code, last, tc.worker)
		}
		learner.waitFor(t, tc.learner, time.Minute)
		if tc.own != "" && !strings.Contains(w.text(), tc.own) || tc.own == "" && strings.Contains(w.text(), "warning: cluster.tls.cert") {
			t.Errorf("%s: the worker's output %q; want a warning at start %q", tc.name, w.text(), tc.own)
		}
	}
	if strings.Contains(learner.text(), " joined: ") {
		t.Errorf("a refused node joined:\n%s", learner.text())
	}
	start(t, bin, "gen", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(ok, "node-2")...)...)
	start(t, bin, "rr", append([]string{"--role", "reward,reference", "--cluster.seeds", seed}, tlsFlags(ok, "node-3")...)...)
	if code := learner.exit(t, 5*time.Minute); code != 0 || strings.Count(learner.text(), " joined: ") != 2 {
		t.Fatalf("learner with good nodes: exit %d\n%s", code, learner.text())
	}
}

// TestLongClusterCARotation: the cluster's CA rotated during a run, in
// the three steps of the README, no node restarted: the CA file made the
// bundle of the old CA and a new one (certs --rotate-ca), every node's
// certificate renewed by the new CA (--renew), the old CA dropped
// (--drop-old-ca). A generator node with a certificate of the new CA
// alone then joins, and one of the old CA is refused by the learner,
// both sides saying "another CA"; the run ends bit-identical to --role
// all. The CA file was read once: the learner refused the new node. The
// reward node is frozen meanwhile, so that the run is still going when
// the late nodes come, whatever the machine's speed.
func TestLongClusterCARotation(t *testing.T) {
	if testing.Short() {
		t.Skip("long: five processes and a run in one")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 100
	every := []string{"--train.checkpoint_every", "10"}
	want := allRun(t, bin, dir, steps, every...)
	ca := certs(t, bin, dir, "certs", 3)
	old := filepath.Join(dir, "old") // the old CA, kept to sign a late node of it
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.pem", "ca.key"} {
		if b, err := os.ReadFile(filepath.Join(ca, f)); err != nil || os.WriteFile(filepath.Join(old, f), b, 0o600) != nil {
			t.Fatalf("copy %s: %v", f, err)
		}
	}
	if err := node.AddNodeCert(old, "late", nil, time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner := start(t, bin, "learner", append(append(append(runFlags(dir, "cluster", steps), every...), "--role", "learner",
		"--cluster.port", strings.Split(seed, ":")[1]), tlsFlags(ca, "node-1")...)...)
	start(t, bin, "generator", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(ca, "node-2")...)...)
	rr := start(t, bin, "reward+reference", append([]string{"--role", "reward,reference", "--cluster.seeds", seed}, tlsFlags(ca, "node-3")...)...)
	run := filepath.Join(dir, "cluster")
	waitFile(t, filepath.Join(run, "checkpoints", "step-10", "MANIFEST.sha256"), 2*time.Minute, learner)
	// The only reward node frozen holds the run mid-step, the learner
	// serving, while the CA is rotated: the run cannot end before the
	// nodes that join after are checked. Thawed, it goes on (rejoining,
	// with its renewed certificate, if the learner gave it up meanwhile).
	rr.signal(t, syscall.SIGSTOP)

	for _, step := range [][]string{{"--rotate-ca"}, {"--renew", "node-1,node-2,node-3,node-4"}, {"--drop-old-ca"}} {
		if p := start(t, bin, "certs", append([]string{"certs", "--out", ca}, step...)...); p.exit(t, time.Minute) != 0 {
			t.Fatalf("certs %s: %s", step, p.text())
		}
	}
	fresh := start(t, bin, "new-CA generator", append([]string{"--role", "generator", "--cluster.seeds", seed}, tlsFlags(ca, "node-4")...)...)
	fresh.waitFor(t, `joined run`, time.Minute)
	learner.waitFor(t, `cluster.tls.ca \S+ read again: peers are verified against "mgrpo cluster CA [^"]+" from now on`, time.Minute)
	late := start(t, bin, "old-CA generator", "--role", "generator", "--cluster.seeds", seed, "--cluster.tls.ca", filepath.Join(ca, "ca.pem"),
		"--cluster.tls.cert", filepath.Join(old, "late.pem"), "--cluster.tls.key", filepath.Join(old, "late.key"))
	if code := late.exit(t, 2*time.Minute); code != 2 || !strings.Contains(late.text(), "refused this node's certificate: it is signed by another CA than the peer's cluster.tls.ca") {
		t.Errorf("a node of the old CA: exit %d, output %q; want exit 2, refused for another CA", code, late.text())
	}
	learner.waitFor(t, `refused a connection from 127\.0\.0\.1:\d+( to the membership port)?: its certificate "mgrpo late" is signed by another CA than this node's cluster.tls.ca`, time.Minute)
	if strings.Contains(learner.text(), "done:") {
		t.Fatalf("the run ended before the rotation was done: give it more steps")
	}
	rr.signal(t, syscall.SIGCONT)
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	sameRun(t, run, want, steps)
}

// TestLongClusterBuildsOfTwoCommits: two builds of source trees that
// differ in one line, both built with -buildvcs=false (so both call
// themselves "dev"), refuse each other: the worker with exit 1, both
// sides naming the two builds in one line (they passed as one build).
func TestLongClusterBuildsOfTwoCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("long: builds two trees")
	}
	dir := t.TempDir()
	a := buildTree(t, "..", filepath.Join(dir, "a"))
	tree := copyTree(t, filepath.Join(dir, "src"))
	file := filepath.Join(tree, "cmd", "mgrpo-node", "certs.go")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), "keep ca.key away from the nodes", "keep ca.key well away from the nodes", 1)
	if changed == string(src) || os.WriteFile(file, []byte(changed), 0o644) != nil {
		t.Fatal("cannot change the copy's certs.go")
	}
	b := buildTree(t, tree, filepath.Join(dir, "b"))
	seed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	learner := start(t, a, "learner", append(runFlags(dir, "builds", 4), "--role", "learner", "--cluster.port", strings.Split(seed, ":")[1])...)
	learner.waitFor(t, `learner node: worker nodes join with`, time.Minute)
	worker := start(t, b, "other commit", "--role", "generator", "--cluster.seeds", seed)
	code := worker.exit(t, 2*time.Minute)
	m := learner.waitFor(t, `refused node \S+ at \S+: build (dev sha256:\w+), the learner runs (dev sha256:\w+)`, time.Minute)
	if m[1] == m[2] {
		t.Errorf("the two builds have one identity %q", m[1])
	}
	if code != 1 || !strings.Contains(worker.text(), "refused by the learner") || !strings.Contains(worker.text(), m[1]) {
		t.Errorf("other commit: exit %d, output %q; want exit 1, refused for its build %s", code, worker.text(), m[1])
	}
}

// buildTree builds mgrpo-node from the source tree src into out with
// GOFLAGS=-buildvcs=false and no link-time stamp, as on machines whose Go
// records no VCS state.
func buildTree(t *testing.T, src, out string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, "./cmd/mgrpo-node")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", src, err, b)
	}
	return out
}

// copyTree copies the files of this source tree git knows (committed or
// not, ignored ones left out) to dst.
func copyTree(t *testing.T, dst string) string {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = ".."
	names, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(names), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join("..", name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestLongClusterWildcardHost: a learner bound to 0.0.0.0 tells worker
// nodes an address they can dial (it said [::]:PORT), and they join.
func TestLongClusterWildcardHost(t *testing.T) {
	if testing.Short() {
		t.Skip("long: three processes")
	}
	bin, dir := binary(t, ""), t.TempDir()
	port := fmt.Sprint(freePort(t))
	learner := start(t, bin, "learner", append(runFlags(dir, "wild", 4), "--role", "learner", "--cluster.host", "0.0.0.0", "--cluster.insecure", "--cluster.port", port)...)
	m := learner.waitFor(t, `learner node: worker nodes join with --cluster.seeds (\S+) \(actors at ([^,)]+), weights at ([^)]+)\)`, time.Minute)
	for _, addr := range m[1:] {
		if strings.HasPrefix(addr, "0.0.0.0:") || strings.HasPrefix(addr, "[::]:") || strings.HasPrefix(addr, ":") {
			t.Errorf("the learner advertises %s", addr)
		}
	}
	for _, role := range []string{"generator", "reward,reference"} {
		start(t, bin, role, "--role", role, "--cluster.seeds", "127.0.0.1:"+port)
	}
	if code := learner.exit(t, 5*time.Minute); code != 0 || strings.Count(learner.text(), " joined: ") != 2 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
}

// TestLongClusterConnectionFlood: a client that opens hundreds of
// connections to every port of a learner (membership, actors, weights,
// Prometheus, run page) and holds them cannot take the descriptors the learner needs
// for its files: those past each port's limit from one host are closed as
// they come, the learner says so in a line per port, and the run ends
// bit-identical to --role all. The learner runs with a descriptor limit of
// 512; it used to run out of descriptors (its membership port held every
// connection) and the run ended at its next file. The flood comes from
// 127.0.0.2, the worker nodes from 127.0.0.1: a limit is per host.
func TestLongClusterConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a cluster of three processes")
	}
	bin, dir, steps := binary(t, ""), t.TempDir(), 400
	want := allRun(t, bin, dir, steps)
	seed, prom, page := freePort(t), freePort(t), freePort(t)
	learner := start(t, "/bin/sh", "learner", append([]string{"-c", `ulimit -n 512 && exec "$0" "$@"`, bin, "--role", "learner",
		"--cluster.port", fmt.Sprint(seed), "--output.prometheus_port", fmt.Sprint(prom), "--output.serve", fmt.Sprintf("127.0.0.1:%d", page)},
		runFlags(dir, "flood", steps)...)...)
	m := learner.waitFor(t, `learner node: worker nodes join with --cluster.seeds \S+ \(actors at ([^,)]+), weights at ([^)]+)\)`, time.Minute)
	actors, weights := m[1], m[2]
	seeds := fmt.Sprintf("127.0.0.1:%d", seed)
	gen := start(t, bin, "gen", "--role", "generator", "--cluster.seeds", seeds)
	rr := start(t, bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", seeds)
	gen.waitFor(t, `joined run`, 2*time.Minute)
	rr.waitFor(t, `joined run`, 2*time.Minute)

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, addr := range []string{seeds, actors, weights, fmt.Sprintf("127.0.0.1:%d", prom), fmt.Sprintf("127.0.0.1:%d", page)} {
		for range 300 {
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial %s: %v", addr, err)
			}
			held = append(held, c)
		}
	}
	if strings.Contains(learner.text(), "done:") {
		t.Fatalf("the run ended before the flood did: give it more steps")
	}
	for _, port := range []string{"membership", "actor", "weight"} {
		learner.waitFor(t, `refused a connection from 127\.0\.0\.2:\d+ to the `+port+` port: too many connections`, time.Minute)
	}
	if code := learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, learner.text())
	}
	sameRun(t, filepath.Join(dir, "flood"), want, steps)
}
