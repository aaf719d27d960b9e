package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/mgrpo/mgrpo/internal/connlimit"
)

// LearnerKind is the cluster kind a node hosting the learner advertises:
// worker nodes find the learner by it.
const LearnerKind = "mgrpo-learner"

// DefaultLearnerPort is the membership port of a learner node when
// cluster.port is 0: the port worker nodes name in --cluster.seeds.
const DefaultLearnerPort = 6330

// refresh is how often membership is polled (go-deps §11a: a dead member
// is dropped within one interval).
const refresh = 500 * time.Millisecond

// Keepalive: a silent connection is pinged after keepaliveTime and dropped
// keepaliveTimeout later, so a hung node (SIGSTOP) is reported as
// terminated (gRPC raises a client time below 10 s to 10 s: ~11 s in all).
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = time.Second
)

// What one peer, or all of them, may hold of a node's membership port and
// of its actor system's gRPC port: a node has one connection to each
// other, and a worker one to the learner's membership, so 64 per host
// leaves room for that many worker processes on one machine. The totals
// are at most an eighth of the process's descriptor limit each
// (connlimit.Limits.Scaled), so that connections never take the
// descriptors of the run's files. A connection has handshakeTimeout to
// finish its TLS or HTTP/2 handshake, and one to the membership port
// httpIdleTimeout between requests.
const (
	maxConnsPerHost  = 64
	maxConns         = 512
	connShare        = 8
	handshakeTimeout = 10 * time.Second
	httpIdleTimeout  = time.Minute
	// maxStreams bounds the gRPC streams open at once on one connection:
	// proto.actor keeps one, and each costs the server a goroutine, so a
	// peer opening millions would take its memory.
	maxStreams = 16
)

// connLimits are the limits of each of a node's ports.
func connLimits() connlimit.Limits {
	return connlimit.Limits{PerHost: maxConnsPerHost, Total: maxConns}.Scaled(connShare)
}

// Options place one process in a cluster.
type Options struct {
	// Name is cluster.name: nodes only see members of their own cluster.
	Name string
	// Host is cluster.host: every port of the node binds it.
	Host string
	// Port is the membership port of a learner node (the one worker nodes
	// name in their seeds); 0 means DefaultLearnerPort. Worker nodes do
	// not listen on it.
	Port int
	// RemotePort is the port of the actor system (gRPC); 0 picks a free one.
	RemotePort int
	// Seeds are the membership addresses (host:port) of learner nodes.
	Seeds []string
	// Learner makes the node a cluster member advertising LearnerKind;
	// other nodes are cluster clients that find it.
	Learner bool
	// TLS, when set, is the mutual TLS of every connection between actor
	// systems (TLSConfigs); nil is plaintext.
	TLS *TLSConfigs
	// MaxMessageBytes is the largest gRPC message this node accepts: one
	// message, or one batch of queued messages (go-deps §11d).
	MaxMessageBytes int
	// BatchSize bounds how many queued messages go out in one gRPC
	// message, so that a batch cannot exceed MaxMessageBytes.
	BatchSize int
	// Advertise, when set, is the host or host:port other nodes dial to
	// reach this node's actor system (behind NAT, or to pick one of several
	// addresses); by default the node advertises Host, or for a wildcard
	// Host (0.0.0.0, ::) this machine's first non-loopback address.
	Advertise string
	// Log receives the actor system's own log lines at WARN and above
	// (nil discards them); routine membership polling errors are dropped.
	Log io.Writer
	// Notices receives the node's one-line notices about its peers: a
	// connection refused and why, a recovered panic; at most one a minute
	// per peer host and kind. nil means Log.
	Notices io.Writer
	// MeterProvider, when set, turns on proto.actor's own actor metrics
	// (actor.WithMetricProviders; see actors/meter).
	MeterProvider metric.MeterProvider
}

// TLSConfigs are the server and client sides of mutual TLS (LoadTLS).
// Server verifies each client against the CA file as it is at that
// handshake, through its GetConfigForClient, which hands out copies of
// Server as LoadTLS made it: a copy with other protocols is made by the
// node (serverConfig), not by cloning Server.
type TLSConfigs struct {
	Server, Client *tls.Config
	cas            *caPool  // the cluster's CA certificates
	keys           *keyPair // this node's certificate and key
}

// Node is one process's actor system, joined to a cluster.
type Node struct {
	sys     *actor.ActorSystem
	cluster *cluster.Cluster
	seed    string      // membership address (learner nodes)
	members *membership // the cluster provider
	tls     *TLSConfigs
	notes   *notices
	host    string // the host every port binds (Options.Host)
	advHost string // the host other nodes dial

	blobsOnce sync.Once
	blobs     *BlobClient // Blobs
	server    *BlobServer // ServeBlobs's (nil: none)
}

// ErrBind: a port of the node cannot be bound.
var ErrBind = errors.New("node: cannot bind")

// bindTries is how many free ports Start tries for the actor system when
// Options.RemotePort is 0: another process may take the port freePort
// found before the actor system binds it.
const bindTries = 5

// Start starts the actor system, its remote endpoint and cluster
// membership. A learner node is a cluster member serving its membership
// on Host:Port; other nodes are cluster clients polling the seeds.
func Start(o Options) (*Node, error) {
	if o.Learner && o.Port == 0 {
		o.Port = DefaultLearnerPort
	}
	return start(o, freePort)
}

// start is Start with the actor system's port chosen by pick (freePort,
// or a test's): a port taken between pick and the bind is given up for
// another one, up to bindTries times, unless the port was asked for.
func start(o Options, pick func(host string, port int) (int, error)) (*Node, error) {
	var lis net.Listener // the learner's membership port
	if o.Learner {
		var err error
		if lis, err = net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port))); err != nil {
			return nil, fmt.Errorf("%w: membership port %s:%d: %w", ErrBind, o.Host, o.Port, err)
		}
	}
	for try := 1; ; try++ {
		remotePort, err := pick(o.Host, o.RemotePort)
		if err == nil {
			var n *Node
			if n, err = startOn(o, remotePort, lis); err == nil {
				return n, nil
			}
		}
		if !errors.Is(err, ErrBind) || o.RemotePort != 0 || try == bindTries {
			if lis != nil {
				lis.Close()
			}
			return nil, err
		}
	}
}

// startOn starts the node with its actor system on remotePort and, on a
// learner, its membership served on lis. proto.actor panics when it cannot
// bind the port (or start the membership): that comes back as an error,
// ErrBind for the port.
func startOn(o Options, remotePort int, lis net.Listener) (n *Node, err error) {
	advHost, advPort, err := advertised(o.Host, remotePort, o.Advertise, net.InterfaceAddrs)
	if err != nil {
		return nil, err
	}
	if o.Notices == nil {
		o.Notices = o.Log
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(loggerFactory(o.Log)), actor.WithMetricProviders(o.MeterProvider))
	n = &Node{sys: sys, tls: o.TLS, notes: newNotices(o.Notices), host: o.Host, advHost: advHost}
	if o.TLS != nil && o.TLS.cas != nil {
		o.TLS.cas.notes.Store(n.notes) // the CA file read again is said with the node's notices
	}
	seeds := slices.Clone(o.Seeds)
	var self func() member
	if lis != nil {
		n.seed = net.JoinHostPort(advHost, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))
		seeds = append([]string{n.seed}, seeds...)
		lis = connlimit.New(connLimits()).Listener(lis, n.notes.refusedConn("membership"))
		self = func() member {
			return member{ID: n.sys.ID, ClusterName: o.Name, Address: advHost, Port: advPort, Kinds: n.cluster.GetClusterKinds()}
		}
	}
	n.members = newMembership(o.Name, seeds, o.TLS, lis, self, n.notes)
	var kinds []*cluster.Kind
	if lis != nil {
		kinds = append(kinds, cluster.NewKind(LearnerKind, actor.PropsFromFunc(func(actor.Context) {})))
	}
	ropts := append(remoteOptions(o, n.notes), remote.WithAdvertisedHost(net.JoinHostPort(advHost, strconv.Itoa(advPort))))
	cfg := cluster.Configure(o.Name, n.members, disthash.New(), remote.Configure(o.Host, remotePort, ropts...),
		cluster.WithKinds(kinds...))
	n.cluster = cluster.New(n.sys, cfg)
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, startPanic(r, o.Host, remotePort)
		}
	}()
	if lis != nil {
		n.cluster.StartMember()
	} else {
		n.cluster.StartClient()
	}
	return n, nil
}

// startPanic is the error a panic of proto.actor's start-up (r) stands
// for: ErrBind when the actor system could not listen on host:port.
func startPanic(r any, host string, port int) error {
	msg := fmt.Sprint(r)
	if strings.Contains(msg, "failed to listen") {
		return fmt.Errorf("%w: actor port %s:%d: %s", ErrBind, host, port, msg)
	}
	return fmt.Errorf("node: start the actor system: %s", msg)
}

// remoteOptions are the gRPC settings of every node: credentials (whose
// server side says why it refuses a connection), the message limit (both
// sides: replies travel the other way), keepalive, the batch bound, and
// the guard that keeps the server standing whatever a peer sends.
func remoteOptions(o Options, notes *notices) []remote.ConfigOption {
	creds := insecure.NewCredentials()
	serverOpts := append([]grpc.ServerOption{
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.MaxRecvMsgSize(o.MaxMessageBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	}, guard{notes}.serverOptions()...)
	var server credentials.TransportCredentials = loggedPlain{insecure.NewCredentials(), notes}
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS.Client)
		server = loggedTLS{credentials.NewTLS(o.TLS.Server), notes}
	}
	serverOpts = append(serverOpts, grpc.Creds(limited{server, connlimit.New(connLimits()), notes}))
	return []remote.ConfigOption{
		remote.WithServerOptions(serverOpts...),
		// WithDialOptions replaces the defaults, which hold only the
		// (insecure) credentials: always give credentials (go-deps §11c).
		remote.WithDialOptions(grpc.WithTransportCredentials(creds),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true})),
		remote.WithEndpointWriterBatchSize(max(o.BatchSize, 1)),
	}
}

// freePort returns port if host:port can be bound, or a free port for 0.
func freePort(host string, port int) (int, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("%w: actor port %s:%d: %w", ErrBind, host, port, err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

// System is the node's actor system.
func (n *Node) System() *actor.ActorSystem { return n.sys }

// Address is host:port of the node's actor system: where its actors are.
func (n *Node) Address() string { return n.sys.Address() }

// Seed is the membership address of a learner node (host:port, what
// other nodes give as --cluster.seeds); "" for other nodes.
func (n *Node) Seed() string { return n.seed }

// Learners lists the actor-system addresses of the learner nodes this
// node currently sees.
func (n *Node) Learners() []string {
	var out []string
	for _, m := range n.cluster.MemberList.Members().Members() {
		if slices.Contains(m.Kinds, LearnerKind) {
			out = append(out, m.Address())
		}
	}
	return out
}

// CheckPeer is CheckPeer(addr) with this node's transport security.
func (n *Node) CheckPeer(addr string) error { return CheckPeer(addr, n.tls) }

// Refused prints that this node refused who (a node, say) at peer
// (host:port) for reason, in one line: "refused WHO at PEER: REASON".
// kind is what the refusal is about, from a fixed vocabulary (reason may
// quote what the peer sent): one kind about one peer host is said once a
// minute at most.
func (n *Node) Refused(kind, who, peer, reason string) {
	n.notes.say(peer, "refused "+kind, "refused %s at %s: %s", who, peer, reason)
}

// Stop stops the node without waiting for a graceful leave. (A cluster
// client has no gossip to leave: Cluster.Shutdown would dereference it.)
func (n *Node) Stop() {
	if n.server != nil {
		n.server.Close()
	}
	n.blobsOnce.Do(func() {}) // after any Blobs: n.blobs is settled
	if n.blobs != nil {
		n.blobs.Close()
	}
	n.members.Shutdown(false)
	if n.seed != "" {
		n.cluster.Shutdown(false)
		return
	}
	n.sys.Shutdown()
	n.cluster.Remote.Shutdown(false)
}

// loggerFactory sends the library's WARN and above to w, without the
// membership poller's reports of seeds that do not answer yet (the node
// says so itself, in one line) or of connections being re-dialled.
func loggerFactory(w io.Writer) func(*actor.ActorSystem) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	h := quiet{slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})}
	return func(*actor.ActorSystem) *slog.Logger { return slog.New(h) }
}

// quiet drops routine log records of the membership poller and endpoint
// writers.
type quiet struct{ slog.Handler }

// routine are the library's messages that describe expected states of a
// cluster whose nodes come and go.
var routine = []string{
	"EndpointWriter failed to connect", "EndpointWriter lost connection", "EndpointWriter failed to create receive stream",
}

// Handle implements slog.Handler.
func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	if slices.Contains(routine, r.Message) {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (q quiet) WithAttrs(a []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(a)} }

// WithGroup implements slog.Handler.
func (q quiet) WithGroup(name string) slog.Handler { return quiet{q.Handler.WithGroup(name)} }
