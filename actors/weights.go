package actors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// policySnapshot hands a generator new weights inside one process: an
// immutable *gpu.Model, so nothing is serialised (DESIGN §2). Across a
// network the same weights travel as PolicyWeights chunks (chunkModel).
type policySnapshot struct {
	model *gpu.Model
}

// chunkModel splits m's weights into PolicyWeights chunks of at most
// maxBytes of tensor data each, tagged with m's version, with the tensor
// names and shapes of l (read from m the first time). The chunks share
// one buffer: a CPU model's own (a snapshot's, which nothing writes; for
// SmolLM2-135M that spares a copy of 540 MB a publication), or a copy of
// a device's weights (Model.Weights). A model
// whose products run in bf16 (model.dtype bf16) sends its product weights
// as bf16 (half the bytes): their rounding is all its products read, so a
// receiver computing in bf16 computes exactly what it does. Such a model
// on a device is read into l's buffer, the same every time: its product
// weights are rounded into bytes of their own and the rest copied, so the
// chunks keep none of it.
func chunkModel(meta *messages.StepMeta, m *gpu.Model, maxBytes int, l *tensorLayout) ([]*messages.PolicyWeights, error) {
	tensors, err := l.tensors(m)
	if err != nil {
		return nil, fmt.Errorf("chunk weights: %w", err)
	}
	return messages.ChunkWeights(meta, m.Version(), tensors, maxBytes), nil
}

// tensorLayout is the names and shapes of the tensors of one model
// configuration, in its weight buffer's order: read from a model once
// (a tensor at a time), then laid over each snapshot's one copy of its
// weights. The zero value reads it from the first model it is given.
type tensorLayout struct {
	cfg     gpu.Config
	shapes  []messages.Tensor // no Data
	product []bool            // by tensor: read only as a product weight (Model.ProductWeights)
	rest    int               // weights of the tensors that are not product weights
	staged  []float32         // a bf16 device model's weights, read here by every cut (tensors)
}

// tensors returns m's tensors as views of one buffer of its weights (see
// chunkModel), the product weights of a bf16 model to travel as bf16.
func (l *tensorLayout) tensors(m *gpu.Model) ([]messages.Tensor, error) {
	if l.shapes == nil || l.cfg != m.Config() {
		if err := l.read(m); err != nil {
			return nil, err
		}
	}
	half := m.DType() == gpu.DTypeBF16
	flat, host := m.HostWeights()
	staged := !host && half
	switch {
	case staged:
		if len(l.staged) != m.NumParams() {
			l.staged = make([]float32, m.NumParams())
		}
		if err := m.ReadWeights(l.staged); err != nil {
			return nil, err
		}
		flat = l.staged
	case !host:
		flat = m.Weights()
	}
	var own []float32 // staged: the copy of the float32 tensors, which their chunks keep
	if staged {
		own = make([]float32, 0, l.rest)
	}
	out := make([]messages.Tensor, len(l.shapes))
	off := 0
	for i, t := range l.shapes {
		n := numel(t.Shape)
		data, dtype := flat[off:off+n:off+n], messages.DType_FLOAT32
		if half && l.product[i] {
			dtype = messages.DType_BF16 // rounded into bytes of their own (messages.ChunkWeights)
		} else if staged {
			own = append(own, data...)
			data = own[len(own)-n : len(own) : len(own)]
		}
		out[i] = messages.Tensor{Name: t.Name, Shape: t.Shape, Data: data, DType: dtype}
		off += n
	}
	return out, nil
}

// read reads the names and shapes of m's tensors, and checks that they
// tile its weight buffer.
func (l *tensorLayout) read(m *gpu.Model) error {
	names := m.TensorNames()
	shapes := make([]messages.Tensor, len(names))
	total := 0
	for i, name := range names {
		_, shape, err := m.Tensor(name)
		if err != nil {
			return err
		}
		s := make([]int64, len(shape))
		for j, d := range shape {
			s[j] = int64(d)
		}
		shapes[i] = messages.Tensor{Name: name, Shape: s}
		total += numel(s)
	}
	if total != m.NumParams() {
		return fmt.Errorf("%w: tensors of %d weights in a buffer of %d", messages.ErrShape, total, m.NumParams())
	}
	l.cfg, l.shapes, l.product, l.rest = m.Config(), shapes, m.ProductWeights(), 0
	for i, s := range shapes {
		if !l.product[i] {
			l.rest += numel(s.Shape)
		}
	}
	return nil
}

// numel is the number of elements of a tensor of shape (1 for a scalar).
func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// addWeightChunk adds one chunk to a; once every chunk of the version has
// arrived it returns the model they make on dev (weights in the sender's
// tensor order, which is gpu's layout order), else nil. A model on a
// device has its weights uploaded: their host buffer becomes a's Buffer,
// where the next version is assembled. A CPU model keeps it.
func addWeightChunk(a *messages.Assembler, cfg gpu.Config, dev gpu.Device, w *messages.PolicyWeights) (*gpu.Model, error) {
	done, err := a.Add(w)
	if err != nil || !done {
		return nil, err
	}
	flat, err := a.Flat()
	if err != nil {
		return nil, err
	}
	m, err := gpu.NewModelOn(dev, cfg, flat, a.Version()) // flat is the model's, or uploaded and dropped
	if err != nil {
		return nil, fmt.Errorf("assemble weights version %d: %w", a.Version(), err)
	}
	if _, host := m.HostWeights(); !host {
		a.Buffer = flat
	}
	return m, nil
}

// errNoWeights: a stage actor of a worker node was asked for work before
// any weights reached it (the coordinator sends them first, so this is a
// protocol fault).
var errNoWeights = errors.New("actors: no weights received yet")

// weightsChannel is the blob channel on which a learner node announces
// each policy version it serves (node.BlobServer.Announce), so that a
// generator node fetches it as soon as it is cut, while the offer naming
// it is on its way.
const weightsChannel = "weights"

// weightReceiver assembles the PolicyWeights chunks one stage actor is
// sent into models of cfg on device, where the stage runs its models
// (model.device: a GPU node's weights go to its GPU once assembled).
type weightReceiver struct {
	cfg     gpu.Config
	device  gpu.Device
	blobs   blobFetcher // fetches the versions offered (nil: none can be)
	channel string      // awaits the versions announced there, fetching each ahead of its offer ("": no)
	asm     *messages.Assembler
	spare   []float32          // on a device: the last fetched version's uploaded host buffer, for the next
	meter   *meter.Instruments // counts the bytes received (nil: off)
	next    *ahead             // the version after the one in use, being fetched ahead (nil: none)
}

// blobFetcher fetches a blob from a learner node's blob server, or awaits
// the next one announced there (node.BlobClient).
type blobFetcher interface {
	Fetch(addr, key string, limit int64, timeout time.Duration, each func(part []byte) error) error
	Await(ctx context.Context, addr, channel, held string, limit int64, timeout time.Duration, each func(part []byte) error) (string, error)
}

// ahead is a version fetched before its offer came: the first that the
// learner node at addr announced after the one the actor took. Its
// fields past done are set once done is closed.
type ahead struct {
	addr   string
	after  int64 // the version the actor took
	cancel context.CancelFunc
	done   chan struct{}
	key    string     // the blob's key, as its offer names it
	model  *gpu.Model // nil: it could not be fetched whole
	err    error
	spare  []float32 // the receiver's spare buffer, handed back
}

// receive adds chunk m and, once its version is complete, hands the
// model to install. A chunk sent as a request (the coordinator sends each
// version's last chunk so) is answered, after install, with
// WeightsApplied once the version is complete, or with a SkipNotice naming
// a rejected chunk.
func (w *weightReceiver) receive(c actor.Context, id string, m *messages.PolicyWeights, install func(*gpu.Model)) {
	if w.asm == nil {
		w.asm = &messages.Assembler{MaxBytes: w.cfg.WeightBytes()} // no more than the model holds
	}
	w.meter.WeightsReceived(chunkBytes([]*messages.PolicyWeights{m}))
	model, err := addWeightChunk(w.asm, w.cfg, w.device, m)
	switch {
	case err != nil:
		c.Logger().Warn("weight chunk rejected", "actor", id, "err", err)
		if c.Sender() != nil {
			c.Respond(notice(m.GetMeta(), id, skip(messages.Stage_SYNC, err)))
		}
	case model != nil:
		install(model)
		if c.Sender() != nil {
			c.Respond(&messages.WeightsApplied{Meta: messages.DeriveMeta(m.GetMeta()), Version: m.GetVersion(), Actor: id})
		}
	}
}

// pull fetches the version m offers and hands its model to install (nil
// when it could not: the actor keeps no older weights), then answers the
// offer with WeightsApplied, or with a SkipNotice (stage SYNC) saying why
// not: the learner then sends the chunks as messages.
//
// The version offered may have been fetched already (fetchAhead: ahead
// says so); once it is in use, the receiver awaits the next.
func (w *weightReceiver) pull(c actor.Context, id string, m *messages.WeightsOffer, install func(*gpu.Model)) (ahead bool, err error) {
	model := w.fetched(c.Sender(), m)
	ahead = model != nil
	if !ahead {
		model, err = w.fetch(c.Sender(), m)
	}
	install(model)
	if err != nil {
		c.Logger().Warn("weights offer not taken", "actor", id, "err", err)
		c.Respond(notice(m.GetMeta(), id, skip(messages.Stage_SYNC, err)))
		return false, err
	}
	c.Respond(&messages.WeightsApplied{Meta: messages.DeriveMeta(m.GetMeta()), Version: m.GetVersion(), Actor: id})
	w.fetchAhead(m)
	return ahead, nil
}

// fetchAhead starts fetching the version after the one m offered as soon
// as its learner node announces it on the receiver's channel: that is
// when the version is cut, a proto.actor trip before its offer arrives
// here, so the fetch and the model's building overlap the offer's trip
// instead of following it. The fetch keeps every check of fetch's but the
// version's, which fetched makes. Without a channel it does nothing.
func (w *weightReceiver) fetchAhead(m *messages.WeightsOffer) {
	if w.channel == "" || w.blobs == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &ahead{addr: m.GetAddress(), after: m.GetVersion(), cancel: cancel, done: make(chan struct{})}
	spare, cfg, dev, blobs, mt, channel := w.spare, w.cfg, w.device, w.blobs, w.meter, w.channel
	w.spare, w.next = nil, a // the fetch ahead assembles in the spare buffer, and hands it back
	timeout := fetchTimeout(m)
	go func() {
		defer close(a.done)
		asm := &messages.Assembler{MaxBytes: cfg.WeightBytes(), Buffer: spare}
		for {
			a.key, a.err = blobs.Await(ctx, a.addr, channel, m.GetKey(), fetchLimit(cfg), timeout, func(part []byte) error {
				pw, err := messages.ParseWeights(part)
				if err != nil {
					return fmt.Errorf("weights fetched ahead: a chunk: %w", err)
				}
				mt.WeightsReceived(chunkBytes([]*messages.PolicyWeights{pw}))
				a.model, err = addWeightChunk(asm, cfg, dev, pw)
				return err
			})
			if !errors.Is(a.err, node.ErrNoBlob) || ctx.Err() != nil { // nothing new for the server's idle time: wait on
				break
			}
		}
		a.spare = asm.Buffer
	}()
}

// fetched returns the model of the version m offers when the fetch ahead
// was of it and ended whole, else nil: the version is then fetched as
// offered. Either way the fetch ahead is over, and its spare buffer back.
// It waits for a fetch ahead still under way when m offers a newer
// version from the same node than the one the actor took: the publisher
// announced that version before offering it (and serves it until the
// offer is answered), so the await is answered with it, or with a newer
// one.
func (w *weightReceiver) fetched(from *actor.PID, m *messages.WeightsOffer) *gpu.Model {
	a := w.next
	if a == nil {
		return nil
	}
	w.next = nil
	same := a.addr == m.GetAddress() && sameHost(from.GetAddress(), a.addr) == nil
	if same && m.GetVersion() > a.after {
		select {
		case <-a.done:
		case <-time.After(fetchTimeout(m)):
		}
	}
	a.cancel()
	<-a.done
	if a.spare != nil {
		w.spare = a.spare
	}
	if !same || a.err != nil || a.key != m.GetKey() || a.model == nil || a.model.Version() != m.GetVersion() {
		return nil
	}
	return a.model
}

// stop ends the fetch ahead, if any (the actor is stopping).
func (w *weightReceiver) stop() {
	if w.next != nil {
		w.next.cancel()
		w.next = nil
	}
}

// fetchTimeout is how long the version m offers may take to arrive.
func fetchTimeout(m *messages.WeightsOffer) time.Duration {
	return max(minTimeout, seconds(float64(m.GetBytes())/slowLink))
}

// fetchLimit bounds the bytes of a version of cfg's weights: its tensors,
// bf16 ones included, and their names and shapes.
func fetchLimit(cfg gpu.Config) int64 { return 2*cfg.WeightBytes() + 16<<20 }

// fetch fetches and assembles the chunks m offers, from the blob server
// of the node that sent the offer (from) and no other. The chunks pass
// the checks of chunks sent as messages, in an assembler of their own.
func (w *weightReceiver) fetch(from *actor.PID, m *messages.WeightsOffer) (*gpu.Model, error) {
	if w.blobs == nil {
		return nil, errors.New("weights offered to an actor that fetches none")
	}
	if err := sameHost(from.GetAddress(), m.GetAddress()); err != nil {
		return nil, err
	}
	asm := &messages.Assembler{MaxBytes: w.cfg.WeightBytes(), Buffer: w.spare}
	defer func() { w.spare = asm.Buffer }() // a failed fetch's buffer too: nothing reads it
	var model *gpu.Model
	err := w.blobs.Fetch(m.GetAddress(), m.GetKey(), fetchLimit(w.cfg), fetchTimeout(m), func(part []byte) error {
		pw, err := messages.ParseWeights(part) // its data read where they arrived, then copied once into asm
		if err != nil {
			return fmt.Errorf("weights version %d: a chunk: %w", m.GetVersion(), err)
		}
		if pw.GetVersion() != m.GetVersion() {
			return fmt.Errorf("a chunk of weights version %d where version %d was offered", pw.GetVersion(), m.GetVersion())
		}
		w.meter.WeightsReceived(chunkBytes([]*messages.PolicyWeights{pw}))
		model, err = addWeightChunk(asm, w.cfg, w.device, pw)
		return err
	})
	if err == nil && model == nil {
		err = fmt.Errorf("weights version %d: the offer ended before its last chunk", m.GetVersion())
	}
	return model, err
}

// sameHost refuses an offer (at addr) that names another host than its
// sender's (from): a node may offer only what it serves itself.
func sameHost(from, addr string) error {
	fh, _, err1 := net.SplitHostPort(from)
	ah, _, err2 := net.SplitHostPort(addr)
	if err1 != nil || err2 != nil || fh != ah {
		return fmt.Errorf("weights offered at %q by %q: not the sender's host", addr, from)
	}
	return nil
}
