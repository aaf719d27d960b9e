package actors

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
)

// TestCheckJoin: a JoinRequest no worker node makes is refused with why:
// an id a line cannot hold, an address other than the sender's, roles no
// worker has. A peer with the cluster's certificate could name itself
// with a megabyte of newlines, or point the learner at another host.
func TestCheckJoin(t *testing.T) {
	from := actor.NewPID("10.0.0.2:4000", "future$1")
	req := func(id, addr string, roles ...string) *messages.JoinRequest {
		return &messages.JoinRequest{NodeId: id, Address: addr, Roles: roles}
	}
	for _, tc := range []struct {
		name   string
		req    *messages.JoinRequest
		sender *actor.PID
		want   string // "" accepted
	}{
		{"a node", req("generator-h-1-ab", "10.0.0.2:4000", "generator"), from, ""},
		{"three roles", req("g", "10.0.0.2:4000", "generator", "reward", "reference"), from, ""},
		{"empty id", req("", "10.0.0.2:4000", "generator"), from, "is not a node id"},
		{"id with a newline", req("a\nrefused node b", "10.0.0.2:4000", "generator"), from, "is not a node id"},
		{"id with a space", req("a b", "10.0.0.2:4000", "generator"), from, "is not a node id"},
		{"id too long", req(strings.Repeat("x", maxNodeID+1), "10.0.0.2:4000", "generator"), from, "is not a node id"},
		{"another address", req("g", "10.0.0.9:4000", "generator"), from, "is not the one it sends from (10.0.0.2:4000)"},
		{"no sender", req("g", "10.0.0.2:4000", "generator"), nil, "is not the one it sends from"},
		{"no roles", req("g", "10.0.0.2:4000"), from, "0 roles"},
		{"the learner's role", req("g", "10.0.0.2:4000", "learner"), from, `role "learner" is not a worker's`},
		{"four roles", req("g", "10.0.0.2:4000", "generator", "reward", "reference", "generator"), from, "4 roles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkJoin(tc.req, tc.sender)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("checkJoin: %v, want one line saying %q", err, tc.want)
			}
		})
	}
}

// TestRegisterAfterJoin: a node registers its actors once for each join,
// from where it joined; a registration without a join (which skipped the
// build check), from another address, or naming more actors than a node
// has is refused with a line, and its actors are not taken.
func TestRegisterAfterJoin(t *testing.T) {
	var notes bytes.Buffer
	m := &membership{opt: &ClusterOptions{Join: &messages.JoinReply{RunId: "r"}, Build: "b", Protocol: 1, Notice: &notes},
		nodes: map[string]*workerNode{}, joined: map[string]joined{}}
	from := actor.NewPID("10.0.0.2:4000", "future$1")
	reg := func(id, addr string, actors int) *messages.Register {
		r := &messages.Register{NodeId: id, Address: addr}
		for range actors {
			r.Actors = append(r.Actors, &messages.StageActor{Stage: messages.Stage_GENERATE, Id: "generator-0"})
		}
		return r
	}
	if err := m.registrable(reg("g", "10.0.0.2:4000", 1), from); err == nil || !strings.Contains(err.Error(), "without joining") {
		t.Errorf("before joining: %v, want refused", err)
	}
	reply := m.join(&messages.JoinRequest{NodeId: "g", Address: "10.0.0.2:4000", Roles: []string{"generator"}, Build: "b", Protocol: 1}, from, true)
	if !reply.GetAccepted() {
		t.Fatalf("join refused: %s", reply.GetReason())
	}
	for _, tc := range []struct {
		name string
		reg  *messages.Register
		from *actor.PID
		want string
	}{
		{"from another address", reg("g", "10.0.0.9:4000", 1), actor.NewPID("10.0.0.9:4000", "f"), "joined from 10.0.0.2:4000 and registers from 10.0.0.9:4000"},
		{"too many actors", reg("g", "10.0.0.2:4000", maxNodeActors+1), from, "more than a node has"},
		{"the node", reg("g", "10.0.0.2:4000", 2), from, ""},
		{"twice for one join", reg("g", "10.0.0.2:4000", 2), from, "without joining"},
	} {
		err := m.registrable(tc.reg, tc.from)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	bad := m.join(&messages.JoinRequest{NodeId: "x\ny", Address: "10.0.0.2:4000", Roles: []string{"generator"}, Build: "b", Protocol: 1}, from, true)
	if bad.GetAccepted() || !strings.Contains(notes.String(), `refused node "x\ny" at 10.0.0.2:4000: its id`) || strings.Count(notes.String(), "\n") != 1 {
		t.Errorf("a bad id: accepted %v, notices %q; want refused in one line", bad.GetAccepted(), notes.String())
	}
}

// TestJoiningBounded: at most maxJoining nodes wait between join and
// registration; past it, joins older than joiningForgets make room, and a
// join that finds none is not answered (the node asks again).
func TestJoiningBounded(t *testing.T) {
	m := &membership{joined: map[string]joined{}}
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i := range maxJoining {
		if !m.admit("n"+string(rune('a'+i%26))+strings.Repeat("x", i/26), "10.0.0.2:1", t0) {
			t.Fatalf("join %d refused", i)
		}
	}
	if m.admit("late", "10.0.0.2:1", t0.Add(time.Second)) {
		t.Error("a join past maxJoining was taken while the others are recent")
	}
	if !m.admit("later", "10.0.0.2:1", t0.Add(joiningForgets)) || len(m.joined) != 1 {
		t.Errorf("a join after joiningForgets: %d waiting, want the old ones forgotten", len(m.joined))
	}
}
