package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// publisher hands weights to the stage actors that run a model: the
// newest policy to every generator, the frozen reference to a remote
// reference scorer. A local generator gets the immutable in-memory model
// (or chunks with PipelineOptions.ChunkWeights), a remote one PolicyWeights
// chunks, cut once per version. Both are sent by the coordinator before any
// later PromptBatch, so a generator always samples with the weights
// published before it was asked. A publication does not wait for the
// remote generators' acknowledgements (WeightsApplied), which only time it
// (lastSync): a generator that froze holds its next part, which is sent
// again when it is dropped, not the step.
type publisher struct {
	runID     string
	start     Sampler // the policy the generators start with
	reference Scorer  // the frozen reference (a *gpu.Model to send)
	chunked   bool    // local generators get chunks too
	chunkSize int     // bytes of tensor data per chunk
	timeout   time.Duration
	tel       telemetry

	blobs    *node.BlobServer                    // serves the chunks to worker nodes' actors (nil: sent as messages)
	layout   tensorLayout                        // the tensor names and shapes the chunks are cut by
	latest   *gpu.Model                          // the newest weights published (nil: none yet)
	chunks   map[int64][]*messages.PolicyWeights // by version: the newest policy, and the reference as referenceVersion
	served   map[int64]bool                      // keys whose chunks the blob server holds
	offers   map[int64]int                       // by key: offers not answered yet (their chunks stay served)
	syncs    []*weightSync                       // publications waiting for their acknowledgements
	lastSync SyncMeasure                         // the newest acknowledged one
}

// SyncMeasure is one weight publication to remote generators: the bytes
// sent and the time until the last of them had the weights in use.
type SyncMeasure struct {
	Version int64
	Bytes   int64
	Seconds float64
}

// weightSync is one publication of new weights waiting for the remote
// generators to have them in use.
type weightSync struct {
	version int64
	start   time.Time
	bytes   int64
	span    oteltrace.Span
	waiting map[*actor.PID]oteltrace.Span // generators whose WeightsApplied has not come, with their spans
}

// referenceVersion keys the reference weights' chunks.
const referenceVersion = -1

// publish hands req's weights to every generator of members.
func (w *publisher) publish(c actor.Context, req *publishRequest, members []*member) {
	policy := req.policy
	w.latest = policy
	ctx, span := w.tel.tracer.Start(req.ctx, spanPublish, oteltrace.WithAttributes(attrVersion.Int64(policy.Version())))
	s := &weightSync{version: policy.Version(), start: time.Now(), span: span, waiting: map[*actor.PID]oteltrace.Span{}}
	w.syncs = append(w.syncs, s)
	for _, m := range members {
		if m.node == "" && !w.chunked {
			c.Send(m.pid, &policySnapshot{model: policy})
			continue
		}
		chunks := w.chunksOf(policy, policy.Version())
		bytes := chunkBytes(chunks)
		s.bytes += bytes
		pid, version := m.pid, policy.Version()
		gctx, span := w.tel.tracer.Start(ctx, spanPublish+".generator", oteltrace.WithAttributes(attrActor.String(pid.GetId()),
			attrNode.String(nodeName(m)), attrBytes.Int64(bytes), attrChunks.Int(len(chunks))))
		s.waiting[pid] = span
		w.send(gctx, c, pid, policy.Version(), chunks, func(res any, err error) { w.acked(pid, ackError(res, err, version)) })
	}
	w.acked(nil, nil)
}

// admit sends a newly registered remote actor of stage the weights it
// needs ahead of any work: the newest policy to a generator, the
// reference to a reference scorer.
func (w *publisher) admit(c actor.Context, pid *actor.PID, stage messages.Stage) {
	switch stage {
	case messages.Stage_GENERATE:
		key, chunks := w.latestChunks()
		w.send(context.Background(), c, pid, key, chunks, nil)
	case messages.Stage_REFERENCE:
		w.send(context.Background(), c, pid, referenceVersion, w.referenceChunks(), nil)
	}
}

// sendLatest hands a local generator that replaced a stopped one the
// newest weights (none before the first publication: it starts with
// the first policy).
func (w *publisher) sendLatest(c actor.Context, pid *actor.PID) {
	if w.latest != nil {
		c.Send(pid, &policySnapshot{model: w.latest})
	}
}

// hasReference reports whether there are reference weights to send.
func (w *publisher) hasReference() bool {
	_, ok := w.reference.(*gpu.Model)
	return ok
}

// left notes that pid will not acknowledge weights any more (why: it left
// the pool).
func (w *publisher) left(pid *actor.PID, why string) { w.acked(pid, errors.New(why)) }

// acked notes that pid has the newest weights in use, failed to take
// them (err), or left the pool (nil: nothing but a check), and records
// every publication that waits for no one any more.
func (w *publisher) acked(pid *actor.PID, err error) {
	w.syncs = slices.DeleteFunc(w.syncs, func(s *weightSync) bool {
		for g, span := range s.waiting {
			if pid != nil && g.Equal(pid) {
				endSpan(span, err)
				delete(s.waiting, g)
			}
		}
		if len(s.waiting) > 0 {
			return false
		}
		s.span.SetAttributes(attrBytes.Int64(s.bytes))
		endSpan(s.span, nil)
		if s.bytes > 0 && s.version >= w.lastSync.Version {
			w.lastSync = SyncMeasure{Version: s.version, Bytes: s.bytes, Seconds: time.Since(s.start).Seconds()}
		}
		return true
	})
}

// latestChunks are the chunks of the newest published policy (the
// starting one before any), and their key (its version).
func (w *publisher) latestChunks() (int64, []*messages.PolicyWeights) {
	m := w.latest
	if m == nil {
		m, _ = w.start.(*gpu.Model)
	}
	if m == nil {
		return 0, nil
	}
	return m.Version(), w.chunksOf(m, m.Version())
}

// referenceChunks are the chunks of the frozen reference.
func (w *publisher) referenceChunks() []*messages.PolicyWeights {
	m, _ := w.reference.(*gpu.Model)
	if m == nil {
		return nil
	}
	return w.chunksOf(m, referenceVersion)
}

// chunksOf cuts m into PolicyWeights chunks once per key (a version, or
// referenceVersion) and keeps only the newest policy's and the
// reference's: cutting a policy version lets go of the older one, cutting
// the reference lets go of none.
func (w *publisher) chunksOf(m *gpu.Model, key int64) []*messages.PolicyWeights {
	if ch, ok := w.chunks[key]; ok {
		return ch
	}
	meta := messages.NewMeta(w.runID, m.Version(), fmt.Sprintf("weights/%d", key), m.Version())
	ch, err := chunkModel(meta, m, max(w.chunkSize, 4), &w.layout)
	if err != nil {
		panic(fmt.Sprintf("actors: chunk weights: %v", err)) // the model's own tensors always chunk
	}
	for k := range w.chunks {
		if k != referenceVersion && key != referenceVersion {
			delete(w.chunks, k)
			w.release(k)
		}
	}
	if w.chunks == nil {
		w.chunks = map[int64][]*messages.PolicyWeights{}
	}
	w.chunks[key] = ch
	return ch
}

// send hands chunks (of key: a version, or referenceVersion) to pid and
// calls done (nil: none) with the answer, WeightsApplied or why not.
// Another node's actor is offered them on the blob server when there is
// one, and sent them as messages if it could not fetch them; a local one
// (PipelineOptions.ChunkWeights), or any without a blob server, is sent
// them as messages.
func (w *publisher) send(ctx context.Context, c actor.Context, pid *actor.PID, key int64, chunks []*messages.PolicyWeights, done func(any, error)) {
	if len(chunks) == 0 {
		return
	}
	if done == nil {
		done = func(any, error) {}
	}
	remote := pid.GetAddress() != c.Self().GetAddress()
	if remote {
		w.tel.meter.WeightsSent(chunkBytes(chunks))
	}
	if !remote || w.blobs == nil {
		c.ReenterAfter(w.sendChunks(c, pid, chunks), done)
		return
	}
	offer := w.offer(key, chunks)
	trace.Inject(ctx, offer.GetMeta()) // the node's span of taking it joins the publication's trace
	c.ReenterAfter(c.RequestFuture(pid, offer, w.timeout), func(res any, err error) {
		w.answered(key)
		if err = ackError(res, err, chunks[0].GetVersion()); err == nil {
			done(res, nil)
			return
		}
		c.Logger().Warn("weights offer not taken: sending them as messages", "actor", pid.GetId(), "version", chunks[0].GetVersion(), "err", err)
		w.tel.meter.WeightsSent(chunkBytes(chunks)) // a second time: the node's counter counts what went out
		c.ReenterAfter(w.sendChunks(c, pid, chunks), done)
	})
}

// sendChunks sends chunks to pid: all but the last as plain messages, the
// last as a request whose answer (WeightsApplied) says the weights are in
// use. It returns that request's future.
func (w *publisher) sendChunks(c actor.Context, pid *actor.PID, chunks []*messages.PolicyWeights) *actor.Future {
	for _, m := range chunks[:len(chunks)-1] {
		c.Send(pid, m)
	}
	return c.RequestFuture(pid, chunks[len(chunks)-1], w.timeout)
}

// offer serves chunks under key on the blob server (each encoded when a
// fetch reaches it: the chunks are the one copy of the weights) until
// the offer it returns is answered, and at least as long as they are the
// newest (see release).
func (w *publisher) offer(key int64, chunks []*messages.PolicyWeights) *messages.WeightsOffer {
	name := blobKey(key)
	if !w.served[key] {
		if w.served == nil {
			w.served = map[int64]bool{}
		}
		w.served[key] = true
		w.blobs.Put(name, chunkBlob(chunks))
		if key != referenceVersion {
			w.blobs.Announce(weightsChannel, name) // generator nodes awaiting it fetch it now (weightReceiver.fetchAhead)
		}
	}
	if w.offers == nil {
		w.offers = map[int64]int{}
	}
	w.offers[key]++
	return &messages.WeightsOffer{Meta: messages.DeriveMeta(chunks[0].GetMeta()), Version: chunks[0].GetVersion(),
		Address: w.blobs.Addr(), Key: name, ChunkCount: int32(len(chunks)), Bytes: chunkBytes(chunks)}
}

// chunkBlob serves a version's chunks, each protobuf-encoded when fetched
// around its tensors' data, which go out from the snapshot's memory.
type chunkBlob []*messages.PolicyWeights

// Parts implements node.Blob.
func (c chunkBlob) Parts() int { return len(c) }

// Part implements node.Blob.
func (c chunkBlob) Part(i int) ([][]byte, error) { return messages.WeightsPieces(c[i]) }

// answered notes that an offer of key's chunks has its answer, and
// releases them if they were the last it kept served.
func (w *publisher) answered(key int64) {
	if w.offers[key]--; w.offers[key] <= 0 {
		delete(w.offers, key)
	}
	w.release(key)
}

// release stops serving the chunks of key once they are no longer kept
// (a newer version was cut) and no offer of them waits for its answer: a
// node still fetching a version the learner has moved past gets it
// whole, and the samples it was asked for with it are not skipped.
func (w *publisher) release(key int64) {
	if _, kept := w.chunks[key]; kept || w.offers[key] > 0 || !w.served[key] {
		return
	}
	delete(w.served, key)
	w.blobs.Delete(blobKey(key))
}

// blobKey names the chunks of key (a version, or referenceVersion) on the
// blob server.
func blobKey(key int64) string {
	if key == referenceVersion {
		return "weights/reference"
	}
	return fmt.Sprintf("weights/%d", key)
}

// ackError is what an answer to the last chunk of version says: nil for
// a WeightsApplied of that version, else why the weights are not in use.
func ackError(res any, err error, version int64) error {
	if err != nil {
		return err
	}
	switch m := res.(type) {
	case *messages.WeightsApplied:
		if m.GetVersion() != version {
			return fmt.Errorf("%s applied weights version %d, want %d", m.GetActor(), m.GetVersion(), version)
		}
		return nil
	case *messages.SkipNotice:
		return fromNotice(m)
	}
	return fmt.Errorf("answer %T to weights", res)
}

// chunkBytes is the tensor bytes of a weight snapshot.
func chunkBytes(chunks []*messages.PolicyWeights) int64 {
	var n int64
	for _, w := range chunks {
		for _, t := range w.GetTensors() {
			n += int64(len(t.GetData()))
		}
	}
	return n
}
