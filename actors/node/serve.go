package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// receiveMethod is the one gRPC method a node serves: proto.actor's
// message stream. Its Remoting service also declares ListProcesses and
// GetProcessDiagnostics, whose handlers are panic("implement me") at the
// pinned version: a single call with an empty body would end the process.
const receiveMethod = "/remote.Remoting/Receive"

// wireSerializer is the only serializer id nodes send (proto.actor's
// endpoint writer never sets another, go-deps §3b); the reader indexes its
// serializer table with the id unchecked.
const wireSerializer = 0

// forbidden are the message types no peer may send: they stop the actor
// they reach. Nodes only stop their own actors, locally.
var forbidden = []string{"actor.Stop", "actor.PoisonPill"}

// guard keeps a node's gRPC server standing whatever a peer sends: every
// method but receiveMethod answers Unimplemented, message batches that
// would make proto.actor's reader index out of range or stop an actor end
// the stream with an error, and a panic in a handler is recovered into an
// error. Each refusal and panic is one notice naming the peer.
type guard struct{ notes *notices }

// serverOptions are the interceptors of guard.
func (g guard) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.unary), grpc.ChainStreamInterceptor(g.stream)}
}

// unary answers every unary method Unimplemented: the node serves none.
func (g guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if info.FullMethod != receiveMethod {
		return nil, status.Errorf(codes.Unimplemented, "%s is not served by mgrpo nodes", info.FullMethod)
	}
	defer g.recover(ctx, info.FullMethod, &err)
	return handler(ctx, req)
}

// stream serves receiveMethod, its batches vetted, and answers any other
// stream Unimplemented.
func (g guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	if info.FullMethod != receiveMethod {
		return status.Errorf(codes.Unimplemented, "%s is not served by mgrpo nodes", info.FullMethod)
	}
	defer g.recover(ss.Context(), info.FullMethod, &err)
	return handler(srv, vetted{ServerStream: ss, g: g})
}

// recover turns a panic of a handler into *err and one notice naming the
// peer (deferred).
func (g guard) recover(ctx context.Context, method string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	addr, who := peerOf(ctx)
	g.notes.say(addr, "panic "+method, "recovered a panic in %s called by %s: %v (the call ends with an error; the node goes on)", method, who, v)
	*err = status.Errorf(codes.Internal, "%s failed", method)
}

// vetted is the server side of a message stream whose batches are
// checked as they arrive.
type vetted struct {
	grpc.ServerStream
	g guard
}

// RecvMsg implements grpc.ServerStream.
func (s vetted) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if err := vetBatch(rm.GetMessageBatch()); err != nil {
		addr, who := peerOf(s.Context())
		s.g.notes.say(addr, "batch", "refused a message batch from %s: %v (its stream is closed)", who, err)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// vetBatch checks what proto.actor's reader takes on trust: every index
// of every envelope in range, the serializer one nodes use, and no type
// that stops an actor. nil is fine.
func vetBatch(b *remote.MessageBatch) error {
	if b == nil {
		return nil
	}
	names, targets, senders := len(b.GetTypeNames()), len(b.GetTargets()), len(b.GetSenders())
	for i, e := range b.GetEnvelopes() {
		switch {
		case e.GetTypeId() < 0 || int(e.GetTypeId()) >= names:
			return fmt.Errorf("envelope %d: type %d of %d", i, e.GetTypeId(), names)
		case e.GetTarget() < 0 || int(e.GetTarget()) >= targets:
			return fmt.Errorf("envelope %d: target %d of %d", i, e.GetTarget(), targets)
		case e.GetSender() < 0 || int(e.GetSender()) > senders:
			return fmt.Errorf("envelope %d: sender %d of %d", i, e.GetSender(), senders)
		case e.GetSerializerId() != wireSerializer:
			return fmt.Errorf("envelope %d: serializer %d", i, e.GetSerializerId())
		case slices.Contains(forbidden, b.GetTypeNames()[e.GetTypeId()]):
			return fmt.Errorf("envelope %d: %s may not be sent to a node", i, b.GetTypeNames()[e.GetTypeId()])
		}
	}
	for i, p := range b.GetTargets() {
		if p == nil {
			return fmt.Errorf("target %d is empty", i)
		}
	}
	return nil
}

// peerOf returns the address of a gRPC call's caller and how notices
// name it: the address and, under TLS, its certificate's subject.
func peerOf(ctx context.Context) (addr, who string) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", "an unknown peer"
	}
	addr, who = p.Addr.String(), p.Addr.String()
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		who += " (certificate " + subject(info.State.PeerCertificates[0]) + ")"
	}
	return addr, who
}
