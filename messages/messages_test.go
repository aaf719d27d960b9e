package messages

import (
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func meta() *StepMeta {
	m := NewMeta("run-1", 7, "b-7-0", 6)
	m.Trace["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" // W3C spec example
	m.Trace["tracestate"] = "mgrpo=1"
	return m
}

func rollouts() *Rollouts {
	prompts := []*Prompt{{Index: 0, Text: "12+34=", TokenIds: []int32{1, 4, 5, 12, 6, 7, 13}, Answer: "46"}}
	var ro []*Rollout
	for k := range 2 {
		ro = append(ro, &Rollout{PromptIndex: 0, TokenIds: []int32{7, 9, 2}, Logp: []float32{-0.1, -0.5, -0.01},
			FinishReason: FinishReason(k + 1), PolicyVersion: 6, GeneratorId: "gen-0", Text: "46"})
	}
	return &Rollouts{Meta: meta(), Prompts: prompts, NumGenerations: 2, Rollouts: ro}
}

func scored(t *testing.T) *Scored {
	t.Helper()
	s, err := NewScored(meta(), rollouts(), []string{"accuracy", "format"}, []float64{1, 0.1},
		[][]float64{{1, 1}, {0.1, 0}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func refScored(t *testing.T) *RefScored {
	return &RefScored{Meta: meta(), Scored: scored(t),
		Ref:        []*TokenLogprobs{{Logp: []float32{-0.2, -0.4, -0.1}}, {Logp: []float32{-1, -2, -3}}},
		RefLogpSum: []float64{-0.7 / 3, -2}}
}

func controller() *ControllerState {
	return &ControllerState{Meta: meta(), Tau: 0.5, Beta: 0.04, TauLog: math.Log(0.5), TauEntropyEma: 1.2, EntropyHistory: true,
		MetaController: &MetaControllerState{Enabled: true, Method: "analytic", LearningRate: 0.05, UpdateInterval: 1,
			AnalyticSteps: 1, TruncationSteps: 1, LastTauGrad: 0.1, LastBetaGrad: -0.2}}
}

// policyMetrics is a fully populated PolicyMetrics with one high-KL token.
func policyMetrics() *PolicyMetrics {
	return &PolicyMetrics{Tokens: 512, MeanNewLogp: -1.2, HasOld: true, MeanOldLogp: -1.1, LogpDiffMean: -0.1, ApproxKl: 0.02,
		TokenKlMax: 0.3, TokenRatioMax: 1.5, HasEntropy: true, Entropy: 1.3, HasClip: true, ClipRatioLow: 0.1, ClipRatioHigh: 0.2,
		HighKl: []*HighKLToken{{Completion: 5, Position: 2, TokenId: 20, Kl: 0.3, Ratio: 1.5, LogpNew: -0.9, LogpOld: -1.3, Advantage: -0.7}}}
}

// samples has one fully populated value of every message type.
func samples(t *testing.T) []proto.Message {
	return []proto.Message{
		meta(),
		&Prompt{Index: 3, Text: "1+1=", TokenIds: []int32{1, 2}, Answer: "2", Seed: 42},
		&PromptBatch{Meta: meta(), Prompts: rollouts().Prompts, NumGenerations: 8},
		rollouts().Rollouts[0],
		rollouts(),
		scored(t),
		&Relay{Meta: meta(), Rollouts: rollouts(), Next: "reference-host-12-ab"},
		&Chain{Meta: meta(), Prompts: &PromptBatch{Meta: meta(), Prompts: rollouts().Prompts, NumGenerations: 8},
			Address: "10.0.0.7:8090", Reward: "reward-host-12-ab", Reference: "reference-host-12-ab"},
		&TokenLogprobs{Logp: []float32{-1, float32(math.Inf(-1))}},
		refScored(t),
		&PreparedBatch{Meta: meta(), RefScored: refScored(t), Weights: []float64{0.6, 0.4}, Advantages: []float64{1, -1}, Controller: controller()},
		&TensorChunk{Name: "lm_head.weight", Shape: []int64{2, 3}, Offset: 8, Data: []byte{1, 2, 3, 4}, TotalBytes: 24},
		ChunkWeights(meta(), 6, []Tensor{{Name: "w", Shape: []int64{3}, Data: []float32{1, 2, 3}}}, 1024)[0],
		controller(),
		controller().MetaController,
		&StepStats{Meta: meta(), WeightEntropy: 0.6, Kl: 0.01, PolicyEntropy: 1.3},
		&ControllerUpdate{Meta: meta(), State: controller(), MetaRan: true, HasTauGrad: true, TauGrad: 0.1, HasBetaGrad: true, BetaGrad: -0.2},
		&StepReport{Meta: meta(), Loss: -0.1, PolicyLoss: -0.12, Kl: 0.01, WeightedKl: 0.0004, Entropy: 1.2, GradNorm: 0.9,
			LearningRate: 1e-4, Tokens: 512, ClipLow: 0.01, ClipHigh: 0.02, ClipRegion: 0.03, IsWeightMean: 0.98,
			IsTruncatedFrac: 0.01, StalenessMin: 1, StalenessMax: 2, ListwiseClipLoss: 0.3,
			ForwardSeconds: 0.01, BackwardSeconds: 0.02, OptimizerSeconds: 0.001, PolicyMetrics: policyMetrics()},
		policyMetrics(),
		policyMetrics().HighKl[0],
		&CheckpointRequest{Meta: meta(), Dir: "runs/a/checkpoints/.tmp-step-5"},
		&CheckpointDone{Meta: meta(), Error: "disk full"},
		&JoinRequest{NodeId: "host-12-ab", Roles: []string{"generator", "reward"}, Build: "v1 abc", Protocol: 1, Address: "10.0.0.2:4101"},
		&JoinReply{Accepted: true, Reason: "", RunId: "run", ConfigYaml: []byte("train:\n  steps: 3\n"), TokenizerFiles: map[string][]byte{"tokenizer.json": []byte("{}")}, ModelJson: []byte(`{"vocab":98}`)},
		&StageActor{Stage: Stage_GENERATE, Id: "generator-host-0"},
		&Register{NodeId: "host-12-ab", Address: "10.0.0.2:4101", Actors: []*StageActor{{Stage: Stage_REWARD, Id: "reward-host-0"}}},
		&Registered{NodeId: "host-12-ab"},
		&Heartbeat{NodeId: "host-12-ab"},
		&HeartbeatAck{Known: true},
		&WeightsApplied{Meta: meta(), Version: 4, Actor: "generator-host-0"},
		&WeightsOffer{Meta: meta(), Version: 4, Address: "10.0.0.1:40123", Key: "weights/4", ChunkCount: 3, Bytes: 3 << 20},
		&SkipNotice{Meta: meta(), Stage: Stage_REWARD, Reason: SkipReason_NON_FINITE_REWARD, Detail: "rollout 3: reward NaN", Actor: "reward-0"},
	}
}

// TestRoundTrip marshals and unmarshals every message type and checks
// that the list covers every message in step.proto.
func TestRoundTrip(t *testing.T) {
	covered := map[protoreflect.FullName]bool{}
	for _, m := range samples(t) {
		name := m.ProtoReflect().Descriptor().FullName()
		covered[name] = true
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("%s: marshal: %v", name, err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatalf("%s: unmarshal: %v", name, err)
		}
		if !proto.Equal(m, back) {
			t.Errorf("%s: round trip changed the message:\n got %v\nwant %v", name, back, m)
		}
		if Hash(m) != Hash(back) {
			t.Errorf("%s: hash differs after round trip", name)
		}
	}
	for _, file := range []protoreflect.FileDescriptor{File_messages_step_proto, File_messages_node_proto} {
		msgs := file.Messages()
		for i := range msgs.Len() {
			if name := msgs.Get(i).FullName(); !covered[name] {
				t.Errorf("message %s has no round-trip sample", name)
			}
		}
	}
}

func TestHash(t *testing.T) {
	a, b := meta(), NewMeta("run-1", 7, "b-7-0", 6)
	b.Trace["tracestate"] = "mgrpo=1" // inserted in the other order
	b.Trace["traceparent"] = a.Trace["traceparent"]
	if Hash(a) != Hash(b) {
		t.Error("equal messages with maps filled in different orders hash differently")
	}
	s := scored(t)
	check := Hash(s)
	if err := Unchanged(check, s); err != nil {
		t.Errorf("Unchanged on an untouched message: %v", err)
	}
	s.Rollouts.Rollouts[1].Logp[2] = -0.02 // a deep mutation
	if err := Unchanged(check, s); !errors.Is(err, ErrMutated) {
		t.Errorf("Unchanged after a deep mutation = %v, want ErrMutated", err)
	}
}

func TestDeriveMetaCopiesTrace(t *testing.T) {
	parent := meta()
	before := Hash(parent)
	child := DeriveMeta(parent)
	child.Trace["traceparent"] = "00-00000000000000000000000000000001-0000000000000001-01"
	child.Step++
	if err := Unchanged(before, parent); err != nil {
		t.Errorf("writing the derived header changed the parent: %v", err)
	}
	if DeriveMeta(nil).GetTrace() == nil {
		t.Error("DeriveMeta(nil) has a nil trace map")
	}
}

func TestScoredShapes(t *testing.T) {
	s := scored(t)
	if err := CheckScored(s); err != nil {
		t.Fatal(err)
	}
	got := s.RewardMatrix()
	if len(got) != 2 || got[1][0] != 0.1 || got[0][1] != 1 {
		t.Errorf("RewardMatrix() = %v, want [[1 1] [0.1 0]]", got)
	}
	if !s.Truncated[1] || s.Truncated[0] {
		t.Errorf("truncated = %v, want [false true] (finish reasons STOP, LENGTH)", s.Truncated)
	}
	if err := CheckRefScored(refScored(t)); err != nil {
		t.Errorf("CheckRefScored: %v", err)
	}
	bad := []struct {
		name string
		err  error
	}{
		{"too few rows", func() error {
			_, err := NewScored(meta(), rollouts(), []string{"a"}, []float64{1}, [][]float64{{1}})
			return err
		}()},
		{"ragged rewards", func() error {
			_, err := NewScored(meta(), rollouts(), []string{"a"}, []float64{1}, [][]float64{{1}, {0, 1}})
			return err
		}()},
		{"rollout count", CheckRollouts(&Rollouts{Prompts: rollouts().Prompts, NumGenerations: 3, Rollouts: rollouts().Rollouts})},
		{"logp per token", func() error {
			r := rollouts()
			r.Rollouts[0].Logp = r.Rollouts[0].Logp[:2]
			return CheckRollouts(r)
		}()},
		{"ref per token", func() error {
			r := refScored(t)
			r.Ref[1].Logp = nil
			return CheckRefScored(r)
		}()},
	}
	for _, tc := range bad {
		if !errors.Is(tc.err, ErrShape) {
			t.Errorf("%s: error %v, want ErrShape", tc.name, tc.err)
		}
	}
}

func TestGroup(t *testing.T) {
	r := rollouts()
	if g := r.Group(0); len(g) != 2 || g[1] != r.Rollouts[1] {
		t.Errorf("Group(0) = %v", g)
	}
}

func TestChunkWeights(t *testing.T) {
	big := make([]float32, 1000)
	for i := range big {
		big[i] = float32(i) * 0.5
	}
	tensors := []Tensor{
		{Name: "model.embed_tokens.weight", Shape: []int64{10, 100}, Data: big},
		{Name: "empty", Shape: []int64{0}},
		{Name: "model.norm.weight", Shape: []int64{3}, Data: []float32{1, -2, float32(math.Inf(1))}},
	}
	for _, limit := range []int{4, 1000, 1024, 4011, 1 << 20} {
		chunks := ChunkWeights(meta(), 9, tensors, limit)
		for _, c := range chunks {
			n := 0
			for _, tc := range c.Tensors {
				n += len(tc.Data)
			}
			if n > limit {
				t.Fatalf("limit %d: chunk %d holds %d bytes", limit, c.ChunkIndex, n)
			}
		}
		var a Assembler
		// deliver in reverse order to show order does not matter
		for i := len(chunks) - 1; i >= 0; i-- {
			done, err := a.Add(chunks[i])
			if err != nil {
				t.Fatalf("limit %d: Add: %v", limit, err)
			}
			if done != (i == 0) {
				t.Fatalf("limit %d: done=%v after chunk %d of %d", limit, done, i, len(chunks))
			}
		}
		got, err := a.Tensors()
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if len(got) != 3 {
			t.Fatalf("limit %d: %d tensors", limit, len(got))
		}
		for i, want := range tensors {
			g := got[i]
			if g.Name != want.Name || len(g.Data) != len(want.Data) {
				t.Fatalf("limit %d: tensor %d = %s[%d], want %s[%d]", limit, i, g.Name, len(g.Data), want.Name, len(want.Data))
			}
			for j := range want.Data {
				if g.Data[j] != want.Data[j] {
					t.Fatalf("limit %d: %s[%d] = %g, want %g", limit, g.Name, j, g.Data[j], want.Data[j])
				}
			}
		}
	}
}

func TestAssemblerRejects(t *testing.T) {
	chunks := ChunkWeights(meta(), 5, []Tensor{{Name: "w", Shape: []int64{4}, Data: []float32{1, 2, 3, 4}}}, 8)
	var a Assembler
	if _, err := a.Add(chunks[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Add(chunks[0]); !errors.Is(err, ErrChunk) {
		t.Errorf("duplicate chunk: %v, want ErrChunk", err)
	}
	if _, err := a.Tensors(); !errors.Is(err, ErrChunk) {
		t.Errorf("Tensors of a partial snapshot: %v, want ErrChunk", err)
	}
	old := ChunkWeights(meta(), 4, []Tensor{{Name: "w", Data: []float32{1}}}, 8)[0]
	if _, err := a.Add(old); !errors.Is(err, ErrChunk) {
		t.Errorf("older version: %v, want ErrChunk", err)
	}
	newer := ChunkWeights(meta(), 6, []Tensor{{Name: "w", Data: []float32{7}}}, 8)[0]
	if done, err := a.Add(newer); err != nil || !done || a.Version() != 6 {
		t.Errorf("newer version: done=%v err=%v version=%d, want a fresh complete snapshot of 6", done, err, a.Version())
	}
}

// TestWithMeta: the copy has the new header and every other field of the
// original, which stays as it was.
func TestWithMeta(t *testing.T) {
	s := scored(t)
	before := Hash(s)
	h := NewMeta("run-1", 7, "b-7-0", 6)
	h.Trace["traceparent"] = "00-00000000000000000000000000000001-0000000000000001-01"
	c := WithMeta(s, h)
	if err := Unchanged(before, s); err != nil {
		t.Fatal(err)
	}
	if c.GetMeta() != h {
		t.Errorf("copy's header is %v, want the new one", c.GetMeta())
	}
	c2 := proto.CloneOf(c)
	c2.Meta = s.GetMeta()
	if !proto.Equal(c2, s) {
		t.Errorf("copy differs from the original beyond its header:\n%v\n%v", c2, s)
	}
}
