package actors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// TestTensorLayout cuts models of two configurations, one after the
// other and back, with one layout: each is read again when the
// configuration changes, and every snapshot assembles to its own weights.
func TestTensorLayout(t *testing.T) {
	var l tensorLayout
	for i, name := range []string{"tiny", "small", "tiny"} {
		cfg, err := gpu.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gpu.NewModel(cfg, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := chunkModel(messages.NewMeta("r", 1, "w", 1), m, 1<<12, &l)
		if err != nil {
			t.Fatal(err)
		}
		if l.cfg != cfg || len(l.shapes) != len(m.TensorNames()) {
			t.Fatalf("%s: layout of %d tensors for another configuration", name, len(l.shapes))
		}
		a := messages.Assembler{MaxBytes: cfg.WeightBytes()}
		var got *gpu.Model
		for _, c := range chunks {
			if got, err = addWeightChunk(&a, cfg, nil, c); err != nil {
				t.Fatal(err)
			}
		}
		if got == nil || !slices.Equal(got.Weights(), m.Weights()) {
			t.Fatalf("%s: assembled weights differ from the model's", name)
		}
	}
}

// TestGeneratorFetchesOfferedWeights: a generator on a worker node takes
// a WeightsOffer by fetching the version's chunks from the blob server of
// the offer's sender, and answers WeightsApplied with the same weights as
// chunks sent as messages give. An offer it cannot take (a key the server
// no longer holds, a server on another host than the sender's) is
// answered with a SkipNotice and leaves it without weights, so that it
// samples nothing with older ones; the chunks sent after as messages give
// it the version.
func TestGeneratorFetchesOfferedWeights(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	model, chunks, server := servedVersion(t, s, 5)
	client := node.NewBlobClient(nil)
	defer client.Close()

	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	sys.ProcessRegistry.Address = "127.0.0.1:1" // a node's: the sender's address names its host
	slot := newPolicySlot(nil)
	gen := sys.Root.Spawn(newGeneratorProps("gen", s.stages.generate, nil, client, quiet(), slot))
	ask := func(m any) any {
		t.Helper()
		res, err := sys.Root.RequestFuture(gen, m, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	offer := func(addr, key string) *messages.WeightsOffer {
		return &messages.WeightsOffer{Meta: chunks[0].GetMeta(), Version: 5, Address: addr, Key: key,
			ChunkCount: int32(len(chunks)), Bytes: chunkBytes(chunks)}
	}
	checkWeights := func(when string) {
		t.Helper()
		got, ok := slot.get().(*gpu.Model)
		if !ok || got.Version() != 5 || !slices.Equal(got.Weights(), model.Weights()) {
			t.Fatalf("%s: the generator holds %v, want version 5's weights", when, slot.get())
		}
	}
	if res := ask(offer(server.Addr(), "weights/5")); !applied(res, 5) {
		t.Fatalf("offer answered %T %v, want WeightsApplied of version 5", res, res)
	}
	checkWeights("after the offer")
	_, port, _ := net.SplitHostPort(server.Addr())
	for _, tc := range []struct{ addr, key, want string }{
		{server.Addr(), "weights/4", "no such blob"},
		{net.JoinHostPort("127.0.0.2", port), "weights/5", "not the sender's host"},
	} {
		res := ask(offer(tc.addr, tc.key))
		n, ok := res.(*messages.SkipNotice)
		if !ok || n.GetStage() != messages.Stage_SYNC || !strings.Contains(n.GetDetail(), tc.want) {
			t.Errorf("offer of %s at %s answered %T %v, want a SYNC SkipNotice naming %q", tc.key, tc.addr, res, res, tc.want)
		}
		if slot.get() != nil {
			t.Errorf("offer of %s at %s: the generator kept older weights", tc.key, tc.addr)
		}
	}
	for _, ch := range chunks[:len(chunks)-1] {
		sys.Root.Send(gen, ch)
	}
	if res := ask(chunks[len(chunks)-1]); !applied(res, 5) {
		t.Fatalf("chunks answered %T %v, want WeightsApplied of version 5", res, res)
	}
	checkWeights("after the chunks")
}

// applied reports whether res is a WeightsApplied of version.
func applied(res any, version int64) bool {
	a, ok := res.(*messages.WeightsApplied)
	return ok && a.GetVersion() == version
}

// TestPublisherFallsBackToMessages: weights offered to a generator on
// another node that cannot fetch them (here: the blob server names a
// host that is not the learner's) are sent to it as chunks instead, and
// the publication completes with the generator holding them; an offer it
// takes completes without any chunk message.
func TestPublisherFallsBackToMessages(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	model, err := gpu.NewModelFromWeights(s.model, testModels(t, s).Policy.(*gpu.Model).Weights(), 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		advertise string // the blob server's host in its offers
		messages  bool   // the weights must come as chunk messages
	}{
		{"fetched", "127.0.0.1", false},
		{"refused", "127.0.0.2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := NewSystem(nil, nil)
			defer sys.Shutdown()
			// This system is a node at 127.0.0.1:1; an actor of it named
			// at 127.0.0.1:2 is another node's, as the publisher sees it.
			sys.ProcessRegistry.Address = "127.0.0.1:1"
			sys.ProcessRegistry.RegisterAddressResolver(func(pid *actor.PID) (actor.Process, bool) {
				return sys.ProcessRegistry.GetLocal(pid.GetId())
			})
			client := node.NewBlobClient(nil)
			defer client.Close()
			slot := newPolicySlot(nil)
			var chunksSeen atomic.Int64
			local := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
				g := &generatorActor{id: "gen", settings: s.stages.generate, tel: quiet(), slot: slot,
					weights: weightReceiver{cfg: s.model, blobs: client}}
				return actor.ReceiveFunc(func(c actor.Context) {
					if _, ok := c.Message().(*messages.PolicyWeights); ok {
						chunksSeen.Add(1)
					}
					g.Receive(c)
				})
			}))
			gen := actor.NewPID("127.0.0.1:2", local.GetId())
			server, err := node.NewBlobServer("127.0.0.1", tc.advertise, 0, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			w := &publisher{runID: "r", chunkSize: 1000, timeout: 10 * time.Second, tel: quiet(), blobs: server}
			done := make(chan error, 1)
			sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(*actor.Started); ok {
					w.send(context.Background(), c, gen, 5, w.chunksOf(model, 5), func(res any, err error) { done <- ackError(res, err, 5) })
				}
			}))
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the publication did not complete")
			}
			if got, ok := slot.get().(*gpu.Model); !ok || !slices.Equal(got.Weights(), model.Weights()) {
				t.Fatalf("the generator holds %v, want version 5's weights", slot.get())
			}
			if n := chunksSeen.Load(); (n > 0) != tc.messages {
				t.Errorf("%d chunk messages reached the generator; want them: %v", n, tc.messages)
			}
		})
	}
}

// TestPublisherKeepsOfferedWeights: a version's chunks stay on the blob
// server while they are the newest policy's, whatever else is cut (the
// reference for a reference scorer that joins), and after a newer
// version is cut until every offer of them is answered. A generator that
// joined just before a reference scorer once found its first version
// gone, and skipped the run's first step.
func TestPublisherKeepsOfferedWeights(t *testing.T) {
	_, w, client, version := weightPort(t)
	w.reference = version(0)
	served := func(key int64) bool {
		t.Helper()
		err := client.Fetch(w.blobs.Addr(), blobKey(key), 1<<30, 10*time.Second, func([]byte) error { return nil })
		if err != nil && !errors.Is(err, node.ErrNoBlob) {
			t.Fatal(err)
		}
		return err == nil
	}
	w.offer(0, w.chunksOf(version(0), 0)) // a generator joins and takes it
	w.answered(0)
	w.offer(referenceVersion, w.referenceChunks()) // then a reference scorer
	if !served(0) || !served(referenceVersion) {
		t.Fatalf("after the reference was cut: version 0 served %v, the reference %v; want both", served(0), served(referenceVersion))
	}
	w.offer(0, w.chunksOf(version(0), 0)) // a second generator joins
	w.chunksOf(version(1), 1)             // and the learner moves on while it fetches
	if !served(0) {
		t.Fatal("version 0 was dropped with its offer unanswered")
	}
	w.answered(0)
	if served(0) {
		t.Error("version 0 is still served after its offer was answered and version 1 cut")
	}
	w.offer(1, w.chunksOf(version(1), 1))
	w.answered(1)
	if !served(1) || !served(referenceVersion) {
		t.Errorf("after their offers were answered: version 1 served %v, the reference %v; want both (they are kept)", served(1), served(referenceVersion))
	}
}

// TestCPUReceiverKeepsEachVersion: a CPU node's model computes with the
// buffer its weights were assembled in, so the next version fetched is
// assembled in a buffer of its own and the model before it keeps its
// weights (a device node reuses the buffer it uploaded:
// TestChunksAssembleOnCUDA).
func TestCPUReceiverKeepsEachVersion(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	first, _, server := servedVersion(t, s, 1)
	w2 := first.Weights()
	for i := range w2 {
		w2[i] += 1
	}
	second, err := gpu.NewModelFromWeights(s.model, w2, 2)
	if err != nil {
		t.Fatal(err)
	}
	w := &publisher{runID: "r", chunkSize: 1000, blobs: server}
	client := node.NewBlobClient(nil)
	defer client.Close()
	r := weightReceiver{cfg: s.model, blobs: client}
	from := actor.NewPID("127.0.0.1:1", "learner")
	got1, err := r.fetch(from, w.offer(1, w.chunksOf(first, 1)))
	if err != nil {
		t.Fatal(err)
	}
	got2, err := r.fetch(from, w.offer(2, w.chunksOf(second, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if r.spare != nil {
		t.Error("a CPU receiver kept a model's buffer to assemble the next version in")
	}
	if !slices.Equal(got1.Weights(), first.Weights()) || !slices.Equal(got2.Weights(), w2) {
		t.Error("fetching version 2 changed version 1's weights, or version 2 differs from the sender's")
	}
}

// TestChunkBlobConcurrentFetches: nodes fetching one version at once each
// get every chunk as it was cut (the chunks are encoded as fetched, from
// the one copy the publisher keeps).
func TestChunkBlobConcurrentFetches(t *testing.T) {
	_, chunks, server := servedVersion(t, testSettings(t, testConfig(t, nil)), 1)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			client := node.NewBlobClient(nil)
			defer client.Close()
			i := 0
			errs <- client.Fetch(server.Addr(), blobKey(1), 1<<30, 10*time.Second, func(part []byte) error {
				pw := &messages.PolicyWeights{}
				if err := proto.Unmarshal(part, pw); err != nil {
					return err
				}
				if !proto.Equal(pw, chunks[i]) {
					return fmt.Errorf("chunk %d differs", i)
				}
				i++
				return nil
			})
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// servedVersion is the test policy as weights version v, its chunks of
// 1000 bytes, and a blob server on 127.0.0.1 serving them under
// blobKey(v), closed with the test.
func servedVersion(t *testing.T, s *settings, v int64) (*gpu.Model, []*messages.PolicyWeights, *node.BlobServer) {
	t.Helper()
	model, err := gpu.NewModelFromWeights(s.model, testModels(t, s).Policy.(*gpu.Model).Weights(), v)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := chunkModel(messages.NewMeta("r", v, blobKey(v), v), model, 1000, &tensorLayout{})
	if err != nil {
		t.Fatal(err)
	}
	server, err := node.NewBlobServer("127.0.0.1", "127.0.0.1", 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	server.Put(blobKey(v), chunkBlob(chunks))
	return model, chunks, server
}

// countingFetcher is a blob client that counts its fetches (not its
// awaits).
type countingFetcher struct {
	*node.BlobClient
	fetches atomic.Int32
}

func (c *countingFetcher) Fetch(addr, key string, limit int64, timeout time.Duration, each func([]byte) error) error {
	c.fetches.Add(1)
	return c.BlobClient.Fetch(addr, key, limit, timeout, each)
}

// weightPort is a blob server on 127.0.0.1 with a publisher serving on
// it, a counting client, and versions of the test policy whose weights
// differ by version (closed with the test).
func weightPort(t *testing.T) (*settings, *publisher, *countingFetcher, func(v int64) *gpu.Model) {
	t.Helper()
	s := testSettings(t, testConfig(t, nil))
	weights := testModels(t, s).Policy.(*gpu.Model).Weights()
	version := func(v int64) *gpu.Model {
		w := slices.Clone(weights)
		for i := range w {
			w[i] += float32(v) / 64
		}
		m, err := gpu.NewModelFromWeights(s.model, w, v)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	server, err := node.NewBlobServer("127.0.0.1", "127.0.0.1", 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	client := &countingFetcher{BlobClient: node.NewBlobClient(nil)}
	t.Cleanup(client.Close)
	return s, &publisher{runID: "r", chunkSize: 1000, tel: quiet(), blobs: server}, client, version
}

// TestGeneratorFetchesAhead: a generator on a worker node that has taken
// a version fetches the next one as soon as the learner node announces it
// (when it is cut, before its offer is sent), and takes that offer without
// fetching it again, with the sender's weights, version after version.
// An offer in a publication's trace gets a span of the taking there,
// saying whether the version was fetched ahead; one without (a version
// handed to a joining generator) gets none.
func TestGeneratorFetchesAhead(t *testing.T) {
	s, w, client, version := weightPort(t)
	sys := NewSystem(nil, nil)
	defer sys.Shutdown()
	sys.ProcessRegistry.Address = "127.0.0.1:1" // a node's: the sender's address names its host
	tel := quiet()
	tracer, exp := memoryTracer(1)
	tel.tracer = tracer
	slot := newPolicySlot(nil)
	gen := sys.Root.Spawn(newGeneratorProps("gen", s.stages.generate, nil, client, tel, slot))
	for v := int64(1); v <= 4; v++ {
		want := version(v)
		offer := w.offer(v, w.chunksOf(want, v))
		if v > 1 {
			ctx, span := tracer.Start(context.Background(), spanPublish+".generator")
			trace.Inject(ctx, offer.GetMeta())
			span.End()
		}
		res, err := sys.Root.RequestFuture(gen, offer, 10*time.Second).Result()
		if err != nil || !applied(res, v) {
			t.Fatalf("offer of version %d answered %T %v, %v; want WeightsApplied", v, res, res, err)
		}
		w.answered(v)
		if got, ok := slot.get().(*gpu.Model); !ok || got.Version() != v || !slices.Equal(got.Weights(), want.Weights()) {
			t.Fatalf("after the offer of version %d the generator holds %v, want its weights", v, slot.get())
		}
	}
	if n := client.fetches.Load(); n != 1 {
		t.Errorf("%d fetches for 4 versions, want 1 (the first; the others fetched ahead)", n)
	}
	// The actor ends a weights span after it has answered the offer: the
	// last one may still be open when its answer arrives here.
	spans := exp.GetSpans()
	for deadline := time.Now().Add(5 * time.Second); countSpans(spans, spanWeights) < 3 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		spans = exp.GetSpans()
	}
	var taken []string
	for _, sp := range spans {
		if sp.Name != spanWeights {
			continue
		}
		ahead := false
		for _, kv := range sp.Attributes {
			if kv.Key == attrAhead {
				ahead = kv.Value.AsBool()
			}
		}
		if !sp.Parent.IsValid() || !ahead {
			t.Errorf("a weights span with parent %v, fetched ahead %v; want the publication's span, true", sp.Parent, ahead)
		}
		taken = append(taken, sp.Name)
	}
	if len(taken) != 3 {
		t.Errorf("%d weights spans, want 3 (versions 2 to 4: version 1's offer carried no trace)", len(taken))
	}
}

// TestFetchAheadGivesWayToTheOffer: a version fetched ahead that is not
// the one offered (a newer one was announced meanwhile) is dropped and
// the offered one fetched; an offer of the version the actor took, or
// from another node, does not wait for a fetch ahead still waiting for
// an announcement; stop ends one.
func TestFetchAheadGivesWayToTheOffer(t *testing.T) {
	s, w, client, version := weightPort(t)
	r := weightReceiver{cfg: s.model, blobs: client, channel: weightsChannel}
	from := actor.NewPID("127.0.0.1:1", "learner")
	o1 := w.offer(1, w.chunksOf(version(1), 1))
	if _, err := r.fetch(from, o1); err != nil {
		t.Fatal(err)
	}
	o2 := w.offer(2, w.chunksOf(version(2), 2))
	o3 := w.offer(3, w.chunksOf(version(3), 3)) // both announced before the fetch ahead starts: it gets 3
	r.fetchAhead(o1)
	if m := r.fetched(from, o2); m != nil {
		t.Fatalf("version %d fetched ahead was taken for version 2's offer", m.Version())
	}
	got, err := r.fetch(from, o2)
	if err != nil || !slices.Equal(got.Weights(), version(2).Weights()) {
		t.Fatalf("version 2 fetched after the fetch ahead was dropped: %v", err)
	}
	if n := client.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}

	// Nothing newer than version 3 is announced: a fetch ahead after it
	// waits, and an offer that waited for it would wait for hours.
	noWait := func(what string, o *messages.WeightsOffer) {
		t.Helper()
		o = proto.Clone(o).(*messages.WeightsOffer)
		o.Bytes = 1 << 40
		r.fetchAhead(o3)
		done := make(chan *gpu.Model, 1)
		go func() { done <- r.fetched(from, o) }()
		select {
		case m := <-done:
			if m != nil {
				t.Errorf("%s: took version %d fetched ahead", what, m.Version())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the offer waits for the fetch ahead", what)
		}
	}
	noWait("the version taken, offered again", o3)
	elsewhere := proto.Clone(o3).(*messages.WeightsOffer)
	_, port, _ := net.SplitHostPort(elsewhere.GetAddress())
	elsewhere.Version, elsewhere.Address = 4, net.JoinHostPort("127.0.0.2", port)
	noWait("a newer version, from another node", elsewhere)
	r.fetchAhead(o3)
	a := r.next
	r.stop()
	<-a.done
	if r.next != nil || !errors.Is(a.err, context.Canceled) {
		t.Errorf("after stop: fetch ahead %v, ended with %v; want none, context.Canceled", r.next, a.err)
	}
}

// countSpans is how many of spans are named name.
func countSpans(spans tracetest.SpanStubs, name string) int {
	n := 0
	for _, sp := range spans {
		if sp.Name == name {
			n++
		}
	}
	return n
}
