package actors

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/messages"
)

// ClusterOptions are what the coordinator of a learner node needs to
// admit worker nodes.
type ClusterOptions struct {
	// Join is the reply an admitted node gets: the run id, configuration,
	// tokenizer and model dimensions (Accepted is set by the coordinator).
	Join *messages.JoinReply
	// Build and Protocol must match a node's for it to join.
	Build    string
	Protocol int32
	// Seed is the address worker nodes give as --cluster.seeds.
	Seed string
	// Notice receives one-line notices: nodes joining and leaving, roles
	// missing while work waits.
	Notice io.Writer
	// Refused, if set, says that a node was refused, instead of Notice:
	// node.Node.Refused, one line a minute per peer and kind.
	Refused func(kind, who, peer, reason string)
	// NoticeEvery is how often a missing role is reported (default 5 s).
	NoticeEvery time.Duration
	// Blobs, if set, serves weights to the actors of worker nodes: each
	// is offered a version (WeightsOffer) and fetches it in one stream
	// (cluster.weight_stream). nil sends them PolicyWeights messages.
	Blobs *node.BlobServer
}

// blobs is o's blob server (nil for a nil o: no worker nodes).
func (o *ClusterOptions) blobs() *node.BlobServer {
	if o == nil {
		return nil
	}
	return o.Blobs
}

// membership is the coordinator's record of the worker nodes of a run:
// it answers their JoinRequest and Heartbeat, keeps the actors each
// registered, forgets a node that left, and says which roles no node
// serves while their work waits. The coordinator puts a node's actors in
// and out of the pools (coordinator.register, dropNode).
type membership struct {
	opt    *ClusterOptions // nil: the run takes no worker nodes
	nodes  map[string]*workerNode
	joined map[string]joined // admitted by join, not yet registered
	timer  *scheduler.TimerScheduler
}

// joined is a node admitted by join: where it is, and when.
type joined struct {
	address string
	at      time.Time
}

// Bounds on what a node may claim: its id (printed in every line about
// it), its actors, and the nodes admitted and not registered yet (a
// registration follows its join within a second; older ones are
// forgotten when room is needed).
const (
	maxNodeID      = 200
	maxNodeActors  = 256
	maxJoining     = 1024
	joiningForgets = time.Minute
)

// workerNode is a registered worker node.
type workerNode struct {
	id, address string
	actors      []*actor.PID
}

// tick is the coordinator's timer: report roles missing while work waits.
type tick struct{}

// start arms the timer of the missing-role notices.
func (m *membership) start(c actor.Context) {
	m.nodes, m.joined = map[string]*workerNode{}, map[string]joined{}
	if m.opt == nil {
		return
	}
	m.timer = scheduler.NewTimerScheduler(c)
	every := m.opt.NoticeEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	m.timer.SendRepeatedly(every, every, c.Self(), tick{})
}

// join answers a node's JoinRequest, sent by sender: the same build and
// protocol are admitted, and a reference scorer only when the learner has
// reference weights to send it; a request that is not one a node makes
// (an id too long or unprintable, an address not the sender's, roles no
// worker has) is refused. An admitted node may register (registrable).
// With maxJoining nodes between join and registration it answers nothing
// (nil): a node then asks again, as it does a busy learner.
func (m *membership) join(req *messages.JoinRequest, sender *actor.PID, hasReference bool) *messages.JoinReply {
	cl := m.opt
	refuse := func(format string, args ...any) *messages.JoinReply {
		reason := fmt.Sprintf(format, args...)
		cl.refused(format, req.GetNodeId(), req.GetAddress(), reason)
		return &messages.JoinReply{Reason: reason}
	}
	switch {
	case cl == nil:
		return &messages.JoinReply{Reason: "this run takes no worker nodes"}
	case req.GetProtocol() != cl.Protocol:
		return refuse("protocol version %d, the learner speaks %d", req.GetProtocol(), cl.Protocol)
	case req.GetBuild() != cl.Build:
		return refuse("build %s, the learner runs %s: run the same mgrpo-node build on every node", req.GetBuild(), cl.Build)
	case !hasReference && slices.Contains(req.GetRoles(), "reference"):
		return refuse("the learner has no reference weights to send")
	}
	if err := checkJoin(req, sender); err != nil {
		return refuse("%v", err)
	}
	if !m.admit(req.GetNodeId(), req.GetAddress(), time.Now()) {
		return nil // unanswered: the node asks again, as of a busy learner
	}
	reply := proto.CloneOf(cl.Join)
	reply.Accepted = true
	return reply
}

// checkJoin refuses a JoinRequest no worker node makes: its id empty,
// longer than maxNodeID or not printable, its address not that of the
// actor system that sent it, its roles not worker roles.
func checkJoin(req *messages.JoinRequest, sender *actor.PID) error {
	if err := checkNodeID(req.GetNodeId()); err != nil {
		return err
	}
	if sender == nil || req.GetAddress() != sender.GetAddress() {
		return fmt.Errorf("its address %.64q is not the one it sends from (%s)", req.GetAddress(), sender.GetAddress())
	}
	roles := req.GetRoles()
	if len(roles) == 0 || len(roles) > 3 {
		return fmt.Errorf("%d roles: a worker has one to three", len(roles))
	}
	for _, r := range roles {
		if !slices.Contains([]string{config.RoleGenerator, config.RoleReward, config.RoleReference}, r) {
			return fmt.Errorf("role %.32q is not a worker's", r)
		}
	}
	return nil
}

// checkNodeID refuses a node id that is empty, longer than maxNodeID or
// holds anything but printable characters without spaces.
func checkNodeID(id string) error {
	if id == "" || len(id) > maxNodeID || !utf8.ValidString(id) || strings.IndexFunc(id, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("its id %.64q is not a node id (1 to %d printable characters)", id, maxNodeID)
	}
	return nil
}

// admit records node id at address as joined at now, making room by
// forgetting joins older than joiningForgets; false when there is none.
func (m *membership) admit(id, address string, now time.Time) bool {
	if _, ok := m.joined[id]; !ok && len(m.joined) >= maxJoining {
		for k, j := range m.joined {
			if now.Sub(j.at) >= joiningForgets {
				delete(m.joined, k)
			}
		}
		if len(m.joined) >= maxJoining {
			return false
		}
	}
	m.joined[id] = joined{address: address, at: now}
	return true
}

// registrable reports why a Register from sender is not taken (nil: it
// is): its node did not join (or joined from elsewhere), it sends from
// another address, or it names too many actors. A node registers once
// for each join.
func (m *membership) registrable(reg *messages.Register, sender *actor.PID) error {
	j, ok := m.joined[reg.GetNodeId()]
	switch {
	case !ok:
		return errors.New("it registered without joining")
	case reg.GetAddress() != j.address || sender == nil || sender.GetAddress() != j.address:
		return fmt.Errorf("it joined from %s and registers from %s", j.address, sender.GetAddress())
	case len(reg.GetActors()) > maxNodeActors:
		return fmt.Errorf("%d actors, more than a node has (%d)", len(reg.GetActors()), maxNodeActors)
	}
	for _, a := range reg.GetActors() {
		if err := checkNodeID(a.GetId()); err != nil {
			return fmt.Errorf("actor id %.64q is not an actor id", a.GetId())
		}
	}
	delete(m.joined, reg.GetNodeId())
	return nil
}

// heartbeat tells a node whether it is still known (not dropped).
func (m *membership) heartbeat(req *messages.Heartbeat) *messages.HeartbeatAck {
	return &messages.HeartbeatAck{Known: m.known(req.GetNodeId())}
}

// known reports whether node id is registered.
func (m *membership) known(id string) bool {
	_, ok := m.nodes[id]
	return ok
}

// admitted records node n, whose actors joined the pools of roles.
func (m *membership) admitted(n *workerNode, roles []string) {
	m.nodes[n.id] = n
	m.notice("node %s at %s joined: %s", n.id, n.address, strings.Join(roles, ", "))
}

// drop forgets node id and returns its actors (none for a node it does
// not know).
func (m *membership) drop(id, why string) []*actor.PID {
	n, ok := m.nodes[id]
	if !ok {
		return nil
	}
	delete(m.nodes, id)
	m.notice("node %s at %s left (%s)", id, n.address, why)
	return n.actors
}

// reportMissing writes one line naming the roles no node serves while
// their pool is empty.
func (m *membership) reportMissing(pools map[messages.Stage]*pool) {
	var missing []string
	for _, s := range []messages.Stage{messages.Stage_GENERATE, messages.Stage_REWARD, messages.Stage_REFERENCE} {
		switch p := pools[s]; {
		case len(p.members) == 0:
			missing = append(missing, p.name)
		case len(p.members) < p.need:
			missing = append(missing, fmt.Sprintf("%s (%d of the %d actors to start with)", p.name, len(p.members), p.need))
		}
	}
	if len(missing) > 0 {
		m.notice("waiting for a node of role %s; start one with --cluster.seeds %s", strings.Join(missing, ", "), m.opt.Seed)
	}
}

// notice writes one line to the cluster's notice writer.
func (m *membership) notice(format string, args ...any) {
	if m.opt != nil && m.opt.Notice != nil {
		fmt.Fprintf(m.opt.Notice, format+"\n", args...)
	}
}
