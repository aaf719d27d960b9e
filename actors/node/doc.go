// Package node starts one process of an mgrpo cluster: its actor system,
// the proto.actor remote endpoint (gRPC, with mutual TLS, keepalive and a
// message limit large enough for the run's messages) and its cluster
// membership.
//
// The node hosting the learner is a cluster member: it serves membership
// on cluster.host:cluster.port (6330 by default) and advertises the kind
// LearnerKind. Every other node is a cluster client that polls the seeds
// it was given (--cluster.seeds), finds the learner among the members and
// talks to it by plain remote PIDs: membership is for discovery only;
// failures are noticed by the coordinator's Watch on each registered
// actor (milliseconds after a process dies) and, for a hung process, by
// gRPC keepalive (about 11 s). No grains are used, so no identity can be
// activated twice (go-deps §11).
//
// Everything binds cluster.host; a wildcard host advertises this
// machine's first non-loopback address (or Options.Advertise). Membership
// answers plain HTTP with the node's address, id and kinds; every actor
// message travels over gRPC, under mutual TLS when LoadTLS is given
// (certificates from WriteCerts, AddNodeCert). LoadTLS's files are read
// again when they change, each at the next handshake: a renewed
// certificate and key, and a CA file that may hold several CAs (a
// bundle, each trusted), so that the CA rotates under a running cluster
// (RotateCA, then AddNodeCert for every node, then DropOldCAs); a file
// caught half written leaves the last whole one in use.
//
// A peer cannot knock a node over: its gRPC server serves proto.actor's
// message stream and answers every other method Unimplemented (two of
// them panic at the pinned version), refuses message batches proto.actor
// would index out of range with or that stop an actor, and recovers a
// panic in a handler into an error. A refused connection (a certificate
// of another CA, expired, not valid yet; no TLS, or TLS at a plaintext
// node), a refused batch and a recovered panic are each one line naming
// the peer, at most once a minute per peer host and kind (Refused does
// the same for the learner's own refusals). CheckPeer tells a worker
// whose learner does not answer whether it never will (ErrTLS, naming the
// reason) or is merely not there (a network error: wait).
//
// It imports protoactor-go, gRPC and internal/atomicfile; nothing of
// actors.
//
//	n, err := node.Start(node.Options{Name: "mgrpo", Host: "127.0.0.1", Seeds: []string{"10.0.0.1:6330"}, MaxMessageBytes: 64 << 20})
//	learners := n.Learners() // addresses of the learner's actor system
package node
