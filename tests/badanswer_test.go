package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/messages"
)

// malformedGenerator answers every part with rollouts one log-prob short
// of their tokens (a node with failing hardware, or a hostile one): a
// PromptBatch, and a Chain, which it answers itself instead of relaying.
// Weights it is sent it ignores.
type malformedGenerator struct{}

func (malformedGenerator) Receive(c actor.Context) {
	var pb *messages.PromptBatch
	switch m := c.Message().(type) {
	case *messages.PromptBatch:
		pb = m
	case *messages.Chain:
		pb = m.GetPrompts()
	default:
		return
	}
	k := int(pb.GetNumGenerations())
	ro := &messages.Rollouts{Meta: messages.DeriveMeta(pb.GetMeta()), Prompts: pb.GetPrompts(), NumGenerations: pb.GetNumGenerations()}
	for i := range len(pb.GetPrompts()) * k {
		ro.Rollouts = append(ro.Rollouts, &messages.Rollout{PromptIndex: int32(i / k), TokenIds: []int32{3, 4, 2}, Logp: []float32{-1, -1}})
	}
	c.Respond(ro)
}

// buildOf is the build identity mgrpo-node at bin reports, which a node
// must give to join its learner.
func buildOf(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	m := regexp.MustCompile(`^mgrpo-node (.* sha256:\S+) `).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("mgrpo-node version: %v: %q", err, out)
	}
	return string(m[1])
}

// joinMalformed starts a node in this process that joins the learner at
// seed and registers a malformedGenerator, and returns the node's id.
func joinMalformed(t *testing.T, bin, seed string) string {
	t.Helper()
	cl := config.Default().Cluster
	n, err := node.Start(node.Options{Name: cl.Name, Host: "127.0.0.1", Seeds: []string{seed}, MaxMessageBytes: cl.MaxMessageBytes, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	deadline := time.Now().Add(time.Minute)
	for len(n.Learners()) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if len(n.Learners()) == 0 {
		t.Fatal("no learner found within a minute")
	}
	coord := actor.NewPID(n.Learners()[0], actors.CoordinatorName)
	id, root := "malformed-1", n.System().Root
	// The learner's run may not have started: it answers from its dead
	// letters until it has.
	ask := func(msg any, answered func(res any) bool) any {
		t.Helper()
		for time.Now().Before(deadline) {
			if res, err := root.RequestFuture(coord, msg, 3*time.Second).Result(); err == nil && answered(res) {
				return res
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the learner did not answer %T", msg)
		return nil
	}
	reply := ask(&messages.JoinRequest{NodeId: id, Roles: []string{config.RoleGenerator}, Build: buildOf(t, bin),
		Protocol: actors.ProtocolVersion, Address: n.Address()}, func(res any) bool { _, ok := res.(*messages.JoinReply); return ok }).(*messages.JoinReply)
	if !reply.GetAccepted() {
		t.Fatalf("join refused: %s", reply.GetReason())
	}
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return malformedGenerator{} }), "generator-"+id+"-0")
	if err != nil {
		t.Fatal(err)
	}
	ask(&messages.Register{NodeId: id, Address: n.Address(), Actors: []*messages.StageActor{{Stage: messages.Stage_GENERATE, Id: pid.GetId()}}},
		func(res any) bool { _, ok := res.(*messages.Registered); return ok })
	return id
}

// TestLongClusterMalformedNode: a generator node whose every answer is
// malformed (rollouts whose token and log-prob counts disagree) does not
// end the run: each part it answers is redone on the other generator node,
// the learner says so once, drops the node at its third malformed answer,
// and the run ends (exit 0) bit-identical to --role all, its metrics
// counting the malformed answers.
func TestLongClusterMalformedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("long: four processes")
	}
	h := startClusterRun(t, 6, 2) // two generator actors: the malformed node draws parts from the first step on
	start(t, h.bin, "gen", "--role", "generator", "--cluster.seeds", h.seed)
	start(t, h.bin, "reward+reference", "--role", "reward,reference", "--cluster.seeds", h.seed)
	id := joinMalformed(t, h.bin, h.seed)
	if code := h.learner.exit(t, 5*time.Minute); code != 0 {
		t.Fatalf("learner: exit %d\n%s", code, h.learner.text())
	}
	out := h.learner.text()
	redone := regexp.MustCompile(`node ` + id + ` at \S+ answered part \d+ of step \d+ with a malformed Rollouts \(rollout 0 has 3 tokens and 2 log-probs\); the part is redone elsewhere\n`)
	left := regexp.MustCompile(`node ` + id + ` at \S+ left \(3 malformed answers, the last: a malformed Rollouts \(rollout 0 has 3 tokens and 2 log-probs\)\)\n`)
	if n := len(redone.FindAllString(out, -1)); n != 1 || len(left.FindAllString(out, -1)) != 1 {
		t.Errorf("%d lines about the malformed answers (want 1) and %d about the drop (want 1):\n%s", n, len(left.FindAllString(out, -1)), out)
	}
	sameRun(t, h.run, h.want, h.steps)
	if raw, err := os.ReadFile(filepath.Join(h.run, "metrics.jsonl")); err != nil || !strings.Contains(string(raw), `"cluster/bad_answers":3`) {
		t.Errorf("metrics.jsonl does not count 3 malformed answers (%v)", err)
	}
}
