package actors

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/messages"
)

// vetPrompts is a part of step 41 (meta step 40): two prompts, K = 2.
func vetPrompts() *messages.PromptBatch { return vetPromptsOf(40) }

// heldStep is the meta step of the parts a held generator holds.
const heldStep = 98

// vetPromptsOf is vetPrompts of meta step n.
func vetPromptsOf(n int64) *messages.PromptBatch {
	return &messages.PromptBatch{Meta: &messages.StepMeta{Step: n}, NumGenerations: 2, Prompts: []*messages.Prompt{
		{Index: 0, TokenIds: []int32{1, 5, 6}, Answer: "11", Seed: 7}, {Index: 1, TokenIds: []int32{1, 8}, Answer: "8", Seed: 8}}}
}

// vetRollouts answers pb as a generator on node does: three tokens, and
// a log-prob each, per completion.
func vetRollouts(pb *messages.PromptBatch, node string) *messages.Rollouts {
	k := int(pb.GetNumGenerations())
	ro := &messages.Rollouts{Meta: messages.DeriveMeta(pb.GetMeta()), Prompts: pb.GetPrompts(), NumGenerations: pb.GetNumGenerations()}
	for i := range len(pb.GetPrompts()) * k {
		ro.Rollouts = append(ro.Rollouts, &messages.Rollout{PromptIndex: int32(i / k), TokenIds: []int32{3, 4, 2},
			Logp: []float32{-0.5, -1, -0.1}, FinishReason: messages.FinishReason_STOP, GeneratorId: node})
	}
	return ro
}

// vetScored scores ro with one reward per completion.
func vetScored(t *testing.T, ro *messages.Rollouts) *messages.Scored {
	t.Helper()
	rows := make([][]float64, len(ro.GetRollouts()))
	for i := range rows {
		rows[i] = []float64{float64(i % 2)}
	}
	sc, err := messages.NewScored(messages.DeriveMeta(ro.GetMeta()), ro, []string{"accuracy"}, []float64{1}, rows)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// vetRefScored adds reference log-probs to sc.
func vetRefScored(sc *messages.Scored) *messages.RefScored {
	rs := &messages.RefScored{Meta: messages.DeriveMeta(sc.GetMeta()), Scored: sc}
	for range sc.GetRollouts().GetRollouts() {
		rs.Ref = append(rs.Ref, &messages.TokenLogprobs{Logp: []float32{-1, -1, -1}})
		rs.RefLogpSum = append(rs.RefLogpSum, -3)
	}
	return rs
}

// TestCheckAnswerBlames: each stage's answer is checked against its part,
// and a malformed one is blamed on the member that made the bad data: on
// a generator's chain the rollouts on the generator, the rewards on the
// reward evaluator, the reference log-probs on the reference scorer; an
// answer of the wrong type on the last member of the chain. Good answers
// and skips pass, and parts of other stages are not checked.
func TestCheckAnswerBlames(t *testing.T) {
	gen, rew, ref := &member{node: "g"}, &member{node: "r"}, &member{node: "f"}
	pb := vetPrompts()
	ro := vetRollouts(pb, "g")
	chained := func(change func(rs *messages.RefScored)) *messages.RefScored {
		rs := proto.CloneOf(vetRefScored(vetScored(t, ro)))
		change(rs)
		return rs
	}
	scoredWith := func(change func(sc *messages.Scored)) *messages.Scored {
		sc := proto.CloneOf(vetScored(t, ro))
		change(sc)
		return sc
	}
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		t    *task
		res  any
		on   *member // nil: passes
		what string  // in the answer's description
	}{
		{"rollouts", &task{part: pb, on: gen}, ro, nil, ""},
		{"a skip", &task{part: pb, on: gen}, &messages.SkipNotice{}, nil, ""},
		{"a learner's part", &task{part: &messages.PreparedBatch{}, on: gen}, "anything", nil, ""},
		{"rollouts short of a log-prob", &task{part: pb, on: gen}, func() *messages.Rollouts {
			bad := proto.CloneOf(ro)
			bad.Rollouts[3].Logp = bad.Rollouts[3].Logp[:2]
			return bad
		}(), gen, "a malformed Rollouts (rollout 3 has 3 tokens and 2 log-probs)"},
		{"rollouts of other prompts", &task{part: pb, on: gen}, vetRollouts(&messages.PromptBatch{Meta: pb.Meta, NumGenerations: 2,
			Prompts: []*messages.Prompt{pb.Prompts[1], pb.Prompts[0]}}, "g"), gen, "a malformed Rollouts (prompt 0 is not the prompt sent)"},
		{"a chain's answer", &task{part: pb, on: gen, via: []*member{rew, ref}}, chained(func(*messages.RefScored) {}), nil, ""},
		{"a chain's rollouts answer it", &task{part: pb, on: gen, via: []*member{rew, ref}}, ro, nil, ""},
		{"a chain's rollouts have a NaN log-prob", &task{part: pb, on: gen, via: []*member{rew, ref}},
			chained(func(rs *messages.RefScored) { rs.Scored.Rollouts.Rollouts[2].Logp[1] = nan }), gen,
			"a malformed RefScored (rollout 2 log-prob 1 is NaN)"},
		{"a chain's reward is infinite", &task{part: pb, on: gen, via: []*member{rew, ref}},
			chained(func(rs *messages.RefScored) { rs.Scored.Rewards[1] = math.Inf(1) }), rew, "rollout 1 reward 0 is +Inf"},
		{"a chain's reference log-prob is NaN", &task{part: pb, on: gen, via: []*member{rew, ref}},
			chained(func(rs *messages.RefScored) { rs.Ref[0].Logp[2] = nan }), ref, "rollout 0 reference log-prob 2 is NaN"},
		{"a chain answered with a string", &task{part: pb, on: gen, via: []*member{rew, ref}}, "x", ref, "a string where a Rollouts was due"},
		{"an unrelayed part answered with a RefScored", &task{part: pb, on: gen}, chained(func(*messages.RefScored) {}), gen,
			"a RefScored where a Rollouts was due"},
		{"scores", &task{part: ro, on: rew}, vetScored(t, ro), nil, ""},
		{"scores of other rollouts", &task{part: ro, on: rew}, scoredWith(func(sc *messages.Scored) { sc.Rollouts.Rollouts[0].TokenIds[0] = 9 }),
			rew, "a malformed Scored (rollout 0 is not the rollout sent)"},
		{"an infinite reward", &task{part: ro, on: rew}, scoredWith(func(sc *messages.Scored) { sc.Rewards[0] = math.Inf(-1) }),
			rew, "rollout 0 reward 0 is -Inf"},
		{"a relayed part's reference log-prob is NaN", &task{part: ro, on: rew, via: []*member{ref}},
			chained(func(rs *messages.RefScored) { rs.Ref[3].Logp[0] = nan }), ref, "rollout 3 reference log-prob 0 is NaN"},
		{"a relayed part's rewards are infinite", &task{part: ro, on: rew, via: []*member{ref}},
			chained(func(rs *messages.RefScored) { rs.Scored.Rewards[0] = math.Inf(1) }), rew, "rollout 0 reward 0 is +Inf"},
		{"reference log-probs", &task{part: vetScored(t, ro), on: ref}, chained(func(*messages.RefScored) {}), nil, ""},
		{"reference log-probs of other rewards", &task{part: vetScored(t, ro), on: ref},
			chained(func(rs *messages.RefScored) { rs.Scored.Rewards[2] = 1 }), ref, "the rewards are not the rewards sent"},
		{"a reference row short", &task{part: vetScored(t, ro), on: ref},
			chained(func(rs *messages.RefScored) { rs.Ref[1].Logp = nil }), ref, "rollout 1 has 3 tokens and 0 reference log-probs"},
	} {
		b := checkAnswer(tc.t, tc.res)
		switch {
		case tc.on == nil && b != nil:
			t.Errorf("%s: %v, want it to pass", tc.name, b)
		case tc.on != nil && b == nil:
			t.Errorf("%s: passed, want %q", tc.name, tc.what)
		case tc.on != nil && (b.on != tc.on || !strings.Contains(b.Error(), tc.what)):
			t.Errorf("%s: %v on node %s, want %q on node %s", tc.name, b, b.on.node, tc.what, tc.on.node)
		}
	}
}

// vetGenerator is a generator of node: it answers a PromptBatch with
// rollouts tagged with its node, malformed (a log-prob short) when bad,
// with a string when wrong; a held one answers a part of heldStep only
// once release is closed.
type vetGenerator struct {
	node       string
	bad, wrong bool
	release    chan struct{}
}

func (g *vetGenerator) Receive(c actor.Context) {
	if pb, ok := c.Message().(*messages.PromptBatch); ok {
		if g.release != nil && pb.GetMeta().GetStep() == heldStep {
			<-g.release
		}
		ro := vetRollouts(pb, g.node)
		if g.bad {
			ro.Rollouts[1].Logp = ro.Rollouts[1].Logp[:2]
		}
		if g.wrong {
			c.Respond("rollouts")
			return
		}
		c.Respond(ro)
	}
}

// vetParent holds a generator pool with its answers checked, and the
// coordinator's record of worker nodes, which drops nodes as it does.
// "gen NODE good|bad|wrong|held" adds a generator of NODE ("local": this
// process's; held: good, a part of heldStep once "release" comes);
// "state" answers a
// vetState; []any of prompt batches is scattered.
type vetParent struct {
	coord   *coordinator
	gen     *pool
	notice  *syncBuffer
	hedge   bool // the pool's
	release chan struct{}
}

// vetState is what vetParent says of its pool and nodes.
type vetState struct {
	members []string // the node of each member
	counts  map[string]int
	total   int
}

func (p *vetParent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		p.gen = &pool{name: "generator", stage: messages.Stage_GENERATE, timeout: time.Minute, retries: 2, hedge: p.hedge}
		p.release = make(chan struct{})
		p.coord = &coordinator{pools: map[messages.Stage]*pool{messages.Stage_GENERATE: p.gen,
			messages.Stage_REWARD: {name: "reward"}, messages.Stage_REFERENCE: {name: "reference"}},
			members: &membership{opt: &ClusterOptions{Notice: p.notice}, nodes: map[string]*workerNode{}}, weights: &publisher{}}
		p.coord.vetAnswers()
	case string:
		p.command(c, strings.Fields(m))
	case []any:
		sender := c.Sender()
		p.gen.scatter(c, m, func(replies []any, err error) { c.Send(sender, &scatterResult{replies, err}) })
	}
}

func (p *vetParent) command(c actor.Context, cmd []string) {
	switch cmd[0] {
	case "release":
		close(p.release)
		c.Respond(true)
		return
	case "state":
		st := vetState{counts: map[string]int{}, total: p.coord.answers.total}
		for _, m := range p.gen.members {
			st.members = append(st.members, m.node)
		}
		for id, n := range p.coord.answers.bad {
			st.counts[id] = n
		}
		c.Respond(st)
		return
	}
	node, g := cmd[1], &vetGenerator{node: cmd[1], bad: cmd[2] == "bad", wrong: cmd[2] == "wrong"}
	if cmd[2] == "held" {
		g.release = p.release
	}
	pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return g }))
	if node == "local" {
		node = ""
	} else {
		n := p.coord.members.nodes[node]
		if n == nil {
			n = &workerNode{id: node, address: "10.0.0." + fmt.Sprint(len(p.coord.members.nodes)+1) + ":4101"}
			p.coord.members.nodes[node] = n
		}
		n.actors = append(n.actors, pid)
	}
	p.gen.add(c, &member{pid: pid, node: node})
	c.Respond(true)
}

// startVet starts a vetParent whose notices go to notice (its pool
// hedging or not), and returns its ask, and request, which sends msg and
// returns the answer's future.
func startVet(t *testing.T, notice *syncBuffer, hedge bool) (ask func(msg any) any, request func(msg any) *actor.Future) {
	sys := NewSystem(nil, nil)
	t.Cleanup(sys.Shutdown)
	parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &vetParent{notice: notice, hedge: hedge} }))
	request = func(msg any) *actor.Future { return sys.Root.RequestFuture(parent, msg, 10*time.Second) }
	return func(msg any) any {
		t.Helper()
		res, err := request(msg).Result()
		if err != nil {
			t.Fatalf("%v: %v", msg, err)
		}
		return res
	}, request
}

// answeredBy is the node of the generator that made each reply.
func answeredBy(t *testing.T, r *scatterResult) []string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("scatter: %v", r.err)
	}
	var out []string
	for _, x := range r.replies {
		out = append(out, x.(*messages.Rollouts).GetRollouts()[0].GetGeneratorId())
	}
	return out
}

// TestPoolRedoesMalformedAnswers: a worker node's malformed answer is a
// failed try: the part is redone on another node's member and the step
// gets that answer, with one line a minute about the node; its third
// drops it (once), and it is counted afresh when it joins again.
func TestPoolRedoesMalformedAnswers(t *testing.T) {
	notice := &syncBuffer{}
	ask, _ := startVet(t, notice, false)
	ask("gen a bad") // first in the pool: a part alone goes to it first
	ask("gen b good")
	for i := range maxBadAnswers {
		if got := answeredBy(t, ask([]any{vetPrompts()}).(*scatterResult)); got[0] != "b" {
			t.Fatalf("part %d answered by node %s, want b", i, got[0])
		}
		st := ask("state").(vetState)
		if want := i + 1; want < maxBadAnswers && (st.counts["a"] != want || len(st.members) != 2) {
			t.Fatalf("after %d malformed answers: %+v, want node a counted %d times, not dropped", want, st, want)
		}
	}
	st := ask("state").(vetState)
	if strings.Join(st.members, ",") != "b" || st.counts["a"] != 0 || st.total != maxBadAnswers {
		t.Fatalf("after %d malformed answers: %+v, want node a dropped, counted afresh, %d in all", maxBadAnswers, st, maxBadAnswers)
	}
	lines := strings.TrimSpace(notice.String())
	want := "node a at 10.0.0.1:4101 answered part 0 of step 41 with a malformed Rollouts (rollout 1 has 3 tokens and 2 log-probs); the part is redone elsewhere\n" +
		"node a at 10.0.0.1:4101 left (3 malformed answers, the last: a malformed Rollouts (rollout 1 has 3 tokens and 2 log-probs))"
	if lines != want {
		t.Errorf("lines:\n%s\nwant:\n%s", lines, want)
	}

	ask("gen a bad") // joins again
	if got := answeredBy(t, ask([]any{vetPrompts(), vetPrompts()}).(*scatterResult)); strings.Join(got, ",") != "b,b" {
		t.Fatalf("with node a back, parts answered by %v, want b,b (part 1 redone there)", got)
	}
	if st := ask("state").(vetState); st.counts["a"] != 1 || len(st.members) != 2 {
		t.Errorf("node a back, one malformed answer: %+v, want it counted once, not dropped", st)
	}
}

// TestPoolSkipsLocalMalformedAnswers: this process's own member is never
// dropped, nor counted against a node: its malformed answer skips the
// step, as before.
func TestPoolSkipsLocalMalformedAnswers(t *testing.T) {
	notice := &syncBuffer{}
	ask, _ := startVet(t, notice, false)
	ask("gen local bad")
	ask("gen c good")
	for range maxBadAnswers {
		r := ask([]any{vetPrompts()}).(*scatterResult)
		var s *SkipError
		if !errors.As(r.err, &s) || s.Stage != messages.Stage_GENERATE || s.Reason != messages.SkipReason_SHAPE_MISMATCH {
			t.Fatalf("a local malformed answer: %v, want a GENERATE/SHAPE_MISMATCH skip", r.err)
		}
	}
	if st := ask("state").(vetState); len(st.members) != 2 || len(st.counts) != 0 || st.total != maxBadAnswers {
		t.Errorf("after local malformed answers: %+v, want both members, none counted against a node, %d in all", st, maxBadAnswers)
	}
	if notice.String() != "" {
		t.Errorf("lines %q, want none", notice.String())
	}
}

// TestPoolRedoesOnAnotherNode: a part answered malformed is redone on a
// member of another node, not on the bad node's other member, which the
// next try would otherwise take.
func TestPoolRedoesOnAnotherNode(t *testing.T) {
	ask, _ := startVet(t, &syncBuffer{}, false)
	for _, cmd := range []string{"gen a bad", "gen a bad", "gen b good"} {
		ask(cmd)
	}
	if got := answeredBy(t, ask([]any{vetPrompts()}).(*scatterResult)); got[0] != "b" {
		t.Fatalf("answered by node %s, want b", got[0])
	}
	if st := ask("state").(vetState); st.counts["a"] != 1 {
		t.Errorf("node a counted %d times, want once (the part redone on node b at once)", st.counts["a"])
	}
}

// TestPoolDropsMalformedHedge: a part hedged on another node whose answer
// there is malformed (or of the wrong type) goes on with its first try:
// the hedge is dropped, the first try's answer counts, and the hedge's
// node is counted.
func TestPoolDropsMalformedHedge(t *testing.T) {
	for _, tc := range []struct{ kind, what string }{
		{"bad", "a malformed Rollouts (rollout 1 has 3 tokens and 2 log-probs)"},
		{"wrong", "a string where a Rollouts was due"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			notice := &syncBuffer{}
			ask, request := startVet(t, notice, true)
			ask("gen h held")
			ask("gen a " + tc.kind)
			answeredBy(t, ask([]any{vetPrompts()}).(*scatterResult)) // on h, the first of the pool: it learns how fast h answers
			result := request([]any{vetPromptsOf(heldStep)})         // on h, held
			for deadline := time.Now().Add(10 * time.Second); ask("state").(vetState).counts["a"] == 0 && time.Now().Before(deadline); {
				time.Sleep(hedgeMin) // until hedged on a, which answers malformed
			}
			ask("release")
			res, err := result.Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := answeredBy(t, res.(*scatterResult)); got[0] != "h" {
				t.Fatalf("answered by %v, want h (the malformed hedge dropped)", got)
			}
			if st := ask("state").(vetState); st.counts["a"] != 1 || len(st.members) != 2 {
				t.Errorf("%+v: want node a counted once, no member dropped", st)
			}
			if want := "node a at 10.0.0.2:4101 answered part 0 of step 99 with " + tc.what + "; the part's other try runs on\n"; notice.String() != want {
				t.Errorf("lines %q, want %q", notice.String(), want)
			}
		})
	}
}
