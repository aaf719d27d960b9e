package actors

import (
	"reflect"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// TestReferenceHoldsPartsUntilWeights: on a worker node, a part relayed
// to the reference scorer by the reward evaluator beside it may overtake
// the reference weights the learner sent when the node joined (they come
// by different ways). It is held and answered once the weights are
// complete, with the reference's log-probs, in the order the parts came;
// a part that comes after them is answered at once.
func TestReferenceHoldsPartsUntilWeights(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	model, err := gpu.NewModel(s.model, 3)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := chunkModel(messages.NewMeta("r", referenceVersion, "weights", referenceVersion), model, 1000, &tensorLayout{})
	if err != nil {
		t.Fatal(err)
	}
	settings := referenceSettings{temperature: 1, model: s.model}
	parts := []*messages.Scored{
		refScoredWithEntropies(t, []float64{1, 0, 0, 1}, []float64{1, 2, 3, 4}).GetScored(),
		refScoredWithEntropies(t, []float64{0, 1, 1, 0}, []float64{4, 3, 2, 1}).GetScored(),
		refScoredWithEntropies(t, []float64{1, 1, 0, 0}, []float64{2, 2, 2, 2}).GetScored(),
	}
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	ref := sys.Root.Spawn(newReferenceProps("ref", settings, nil, nil, quiet(), nil))
	early := []interface{ Result() (any, error) }{
		sys.Root.RequestFuture(ref, parts[0], 10*time.Second),
		sys.Root.RequestFuture(ref, parts[1], 10*time.Second),
	}
	for _, ch := range chunks[:len(chunks)-1] {
		sys.Root.Send(ref, ch)
	}
	if res, err := sys.Root.RequestFuture(ref, chunks[len(chunks)-1], 10*time.Second).Result(); err != nil {
		t.Fatal(err)
	} else if _, ok := res.(*messages.WeightsApplied); !ok {
		t.Fatalf("last chunk answered %T, want WeightsApplied", res)
	}
	answers := append(early, sys.Root.RequestFuture(ref, parts[2], 10*time.Second))
	for i, f := range answers {
		res, err := f.Result()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		got, ok := res.(*messages.RefScored)
		if !ok {
			t.Fatalf("part %d answered %T (%v), want RefScored", i, res, res)
		}
		want, err := referenceScore(model, settings, parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.GetRefLogpSum(), want.GetRefLogpSum()) || !reflect.DeepEqual(got.GetScored().GetRewards(), parts[i].GetRewards()) {
			t.Errorf("part %d: rewards %v and reference log-prob sums %v, want %v and %v", i,
				got.GetScored().GetRewards(), got.GetRefLogpSum(), parts[i].GetRewards(), want.GetRefLogpSum())
		}
	}
}
