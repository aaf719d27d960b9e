package messages

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fill sets every field of m that is still unset to a value that names it:
// scalars from the field number and salt, repeated fields with three
// entries, nested messages filled in turn. A field added to step.proto is
// filled too, so the tests below see it without being told.
func fill(m protoreflect.Message, salt int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if m.Has(fd) {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Set(protoreflect.ValueOfString(fmt.Sprintf("k%d", salt)).MapKey(), scalar(fd.MapValue(), salt))
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range 3 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), salt*10+j)
					l.Append(e)
				} else {
					l.Append(scalar(fd, salt*10+j))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message(), salt+int(fd.Number()))
		default:
			m.Set(fd, scalar(fd, salt+int(fd.Number())))
		}
	}
}

// scalar is a non-zero value of fd's kind derived from n.
func scalar(fd protoreflect.FieldDescriptor, n int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(1 + n%(vals.Len()-1)).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n + 1))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(n + 1))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n + 1))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n + 1))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.25)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(n)})
	}
	panic(fmt.Sprintf("no test value for %s", fd.Kind()))
}

// fullBatch returns a valid Scored of p groups of k completions in which
// every field of every message is set (fill), each prompt and completion
// distinct, with per-completion rows that name their completion.
func fullBatch(p, k, salt int) *Scored {
	ro := &Rollouts{Meta: NewMeta("run", 3, fmt.Sprintf("b%d", salt), 2), NumGenerations: int32(k)}
	for g := range p {
		pr := &Prompt{}
		fill(pr.ProtoReflect(), 1000*salt+100*g)
		pr.Index = int32(g)
		ro.Prompts = append(ro.Prompts, pr)
		for j := range k {
			r := &Rollout{PromptIndex: int32(g), TokenIds: []int32{int32(g), int32(j), 2}, Logp: []float32{-1, -2, float32(-g - j)}}
			fill(r.ProtoReflect(), 1000*salt+100*g+j)
			r.PromptIndex = int32(g)
			ro.Rollouts = append(ro.Rollouts, r)
		}
	}
	fill(ro.ProtoReflect(), salt)
	rows := make([][]float64, p*k)
	for i := range rows {
		rows[i] = []float64{float64(1000*salt + i), math.NaN()}
	}
	sc, err := NewScored(NewMeta("run", 3, "s", 2), ro, []string{"accuracy", "format"}, []float64{1, 0.5}, rows)
	if err != nil {
		panic(err)
	}
	sc.Truncated[0] = !sc.Truncated[0] // a flag that does not follow from the finish reason travels too
	fill(sc.ProtoReflect(), salt)
	return sc
}

// withoutIndex is a copy of m with its position in a batch cleared.
func withoutIndex[M proto.Message](m M) M {
	c := proto.CloneOf(m)
	switch x := any(c).(type) {
	case *Prompt:
		x.Index = 0
	case *Rollout:
		x.PromptIndex = 0
	}
	return c
}

// completion is one completion of a batch with everything the batch says
// about it, for comparing batches that hold it in different places.
type completion struct {
	prompt    *Prompt
	rollout   *Rollout
	rewards   []float64
	truncated bool
}

func completions(sc *Scored) []completion {
	ro := sc.GetRollouts()
	r := len(sc.GetRewardNames())
	out := make([]completion, len(ro.GetRollouts()))
	for i, x := range ro.GetRollouts() {
		out[i] = completion{prompt: ro.GetPrompts()[x.GetPromptIndex()], rollout: x,
			rewards: sc.GetRewards()[i*r : (i+1)*r], truncated: sc.GetTruncated()[i]}
	}
	return out
}

func sameCompletion(t *testing.T, what string, got, want completion) {
	t.Helper()
	if !proto.Equal(withoutIndex(got.prompt), withoutIndex(want.prompt)) {
		t.Errorf("%s: prompt %v, want %v", what, got.prompt, want.prompt)
	}
	if !proto.Equal(withoutIndex(got.rollout), withoutIndex(want.rollout)) {
		t.Errorf("%s: rollout %v, want %v", what, got.rollout, want.rollout)
	}
	if !slices.EqualFunc(got.rewards, want.rewards, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) ||
		got.truncated != want.truncated {
		t.Errorf("%s: rewards %v truncated %v, want %v %v", what, got.rewards, got.truncated, want.rewards, want.truncated)
	}
}

// TestJoinKeepsEveryField splits and joins batches whose every field is
// set: every prompt and completion comes out whole, with the rows that
// belong to it, renumbered to its new place. (The old field-by-field copy
// dropped Rollout.entropy here.)
func TestJoinKeepsEveryField(t *testing.T) {
	a, b := fullBatch(3, 2, 1), fullBatch(2, 2, 2)
	ca, cb := completions(a), completions(b)
	// keep group 2 then 0 of a, and group 1 of b: a retry or refill does this
	joined, err := JoinScored(NewMeta("run", 3, "j", 2), []*Scored{a, b}, [][]int{{2, 0}, {1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckScored(joined); err != nil {
		t.Fatalf("joined batch: %v", err)
	}
	want := []completion{ca[4], ca[5], ca[0], ca[1], cb[2], cb[3]}
	got := completions(joined)
	if len(got) != len(want) {
		t.Fatalf("%d completions, want %d", len(got), len(want))
	}
	for i := range want {
		sameCompletion(t, fmt.Sprintf("joined completion %d", i), got[i], want[i])
		if int(got[i].rollout.GetPromptIndex()) != i/2 || int(got[i].prompt.GetIndex()) != i/2 {
			t.Errorf("completion %d: prompt index %d (prompt %d), want %d", i, got[i].rollout.GetPromptIndex(), got[i].prompt.GetIndex(), i/2)
		}
	}
	for _, size := range []int{1, 2, 3} {
		parts, err := SplitScored(joined, size)
		if err != nil {
			t.Fatal(err)
		}
		back, err := JoinScored(joined.GetMeta(), parts, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, joined) {
			t.Errorf("split in parts of %d and joined again: batch changed", size)
		}
		rparts, err := SplitGroups(joined.GetRollouts(), size)
		if err != nil {
			t.Fatal(err)
		}
		rback, err := JoinRollouts(joined.GetRollouts().GetMeta(), rparts, nil)
		if err != nil || !proto.Equal(rback, joined.GetRollouts()) {
			t.Errorf("rollouts split in parts of %d and joined again: changed (%v)", size, err)
		}
	}
}

// TestJoinKnowsEveryField fails when step.proto grows a field that the
// join helpers copy by position (per prompt or per completion) without
// knowing it: teach JoinScored / JoinRefScored, then add it here.
func TestJoinKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		m     proto.Message
		known []protoreflect.Name // everything else is copied whole from part 0
	}{
		{&Scored{}, []protoreflect.Name{"meta", "rollouts", "reward_names", "reward_weights", "rewards", "truncated"}},
		{&RefScored{}, []protoreflect.Name{"meta", "scored", "ref", "ref_logp_sum"}},
		{&Rollouts{}, []protoreflect.Name{"meta", "prompts", "num_generations", "rollouts"}},
		{&PromptBatch{}, []protoreflect.Name{"meta", "prompts", "num_generations"}},
	} {
		fields := tc.m.ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			if name := fields.Get(i).Name(); !slices.Contains(tc.known, name) {
				t.Errorf("%T has field %s that the join helpers do not know", tc.m, name)
			}
		}
	}
}

func TestJoinRefScored(t *testing.T) {
	sc := fullBatch(3, 2, 1)
	rs := &RefScored{Meta: NewMeta("run", 3, "r", 2), Scored: sc}
	for i, r := range sc.GetRollouts().GetRollouts() {
		lp := make([]float32, len(r.GetTokenIds()))
		for j := range lp {
			lp[j] = float32(-i - j)
		}
		rs.Ref = append(rs.Ref, &TokenLogprobs{Logp: lp})
		rs.RefLogpSum = append(rs.RefLogpSum, float64(-i))
	}
	parts, err := SplitScored(sc, 2)
	if err != nil {
		t.Fatal(err)
	}
	var refParts []*RefScored
	off := 0
	for _, p := range parts {
		n := len(p.GetRollouts().GetRollouts())
		refParts = append(refParts, &RefScored{Meta: DeriveMeta(rs.GetMeta()), Scored: p, Ref: rs.Ref[off : off+n], RefLogpSum: rs.RefLogpSum[off : off+n]})
		off += n
	}
	got, err := JoinRefScored(rs.GetMeta(), refParts)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(noHeaders(got), noHeaders(rs)) {
		t.Errorf("reference-scored parts joined: %v\nwant %v", got, rs)
	}
}

func TestSplitPromptsKeepsSeeds(t *testing.T) {
	ro := fullBatch(5, 1, 1).GetRollouts()
	pb := &PromptBatch{Meta: NewMeta("run", 3, "p", 2), Prompts: ro.GetPrompts(), NumGenerations: 4}
	parts := SplitPrompts(pb, 2)
	if len(parts) != 3 {
		t.Fatalf("%d parts, want 3", len(parts))
	}
	i := 0
	for _, part := range parts {
		if part.GetNumGenerations() != 4 {
			t.Errorf("part has %d generations, want 4", part.GetNumGenerations())
		}
		for j, p := range part.GetPrompts() {
			if p.GetIndex() != int32(j) || !proto.Equal(withoutIndex(p), withoutIndex(pb.GetPrompts()[i])) {
				t.Errorf("prompt %d of the batch came out as %v", i, p)
			}
			i++
		}
	}
	if one := SplitPrompts(pb, 5); len(one) != 1 || one[0] != pb {
		t.Errorf("a batch that fits one part was split")
	}
}

func TestJoinRefusesMismatchedParts(t *testing.T) {
	a, b := fullBatch(1, 2, 1), fullBatch(1, 2, 2)
	b.RewardWeights = []float64{1, 1}
	if _, err := JoinScored(a.GetMeta(), []*Scored{a, b}, nil); err == nil {
		t.Error("joined batches scored with different reward weights")
	}
	c := fullBatch(1, 3, 3)
	if _, err := JoinRollouts(a.GetMeta(), []*Rollouts{a.GetRollouts(), c.GetRollouts()}, nil); err == nil {
		t.Error("joined batches with different group sizes")
	}
}

// noHeaders is a copy of rs without the headers of its nested messages.
func noHeaders(rs *RefScored) *RefScored {
	c := proto.CloneOf(rs)
	c.Meta, c.Scored.Meta, c.Scored.Rollouts.Meta = nil, nil, nil
	return c
}
