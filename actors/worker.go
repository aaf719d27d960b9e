package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// Worker timing: how often a worker looks for the learner and says it
// waits, and how often it tells the learner it is still there.
const (
	lookEvery      = 200 * time.Millisecond
	waitNoticeEach = 5 * time.Second
	heartbeatEvery = time.Second
	askTimeout     = 3 * time.Second
	learnerLost    = 5                      // missed heartbeats before the learner counts as gone
	exitFlushTime  = 500 * time.Millisecond // a stopping node's last spans: the node leaves within a second
)

// ErrRefused: the learner refused this node (another build or protocol).
var ErrRefused = errors.New("actors: refused by the learner")

// Serve runs a worker node (roles among generator, reward, reference):
// it finds the learner through the seeds, joins its run (the learner sends
// the configuration, tokenizer and weights: no shared disk), starts its
// stage actors and serves them until ctx is cancelled. When the learner
// goes away or drops the node, it stops its actors and joins again, so a
// node outlives runs and restarts of the learner.
func Serve(ctx context.Context, cfg *config.Config, out io.Writer) error {
	if err := writableFile("trace.file", cfg.Trace.File); err != nil { // the node's own, for every run it joins
		return err
	}
	w := &worker{cfg: cfg, out: out, id: newNodeID(strings.ReplaceAll(cfg.Cluster.Role, ",", "+"))}
	gcLine, restoreGC := setWorkerGC(os.Getenv(goGCEnv), os.Getenv(goMemoryLimitEnv))
	defer restoreGC()
	mp, err := newMetrics(ctx, cfg, w.id, cfg.Cluster.Roles(), out) // the node's own, across runs
	if err != nil {
		return err
	}
	defer func() { // the node's last metrics, within exitFlushTime: it leaves at once when told to
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), exitFlushTime)
		defer cancel()
		mp.Shutdown(flush)
	}()
	dev, err := openDevice(cfg.Model) // this machine's: the weights the learner sends run on it
	if err != nil {
		return err
	}
	defer dev.Close()
	n, err := startNode(cfg.Cluster, false, cfg.Cluster.MaxMessageBytes, mp.MeterProvider(), os.Stderr)
	if err != nil {
		return err
	}
	defer n.Stop()
	defer mp.Instruments().WatchSupervision(n.System())()
	w.node, w.meter, w.device = n, mp.Instruments(), dev
	fmt.Fprintf(out, "node %s: %s, actors at %s, looking for the learner at %s\n", w.id, cfg.Cluster.Role, n.Address(), strings.Join(cfg.Cluster.Seeds, ", "))
	if gcLine != "" {
		fmt.Fprintln(out, gcLine)
	}
	for ctx.Err() == nil {
		coord, err := w.findLearner(ctx)
		if errors.Is(err, node.ErrTLS) {
			return err
		}
		if err != nil {
			break
		}
		if err := w.serveRun(ctx, coord); err != nil {
			return err
		}
		select { // a learner still in its warm start does not answer yet
		case <-ctx.Done():
		case <-time.After(lookEvery):
		}
	}
	return nil
}

// worker is one worker node's state.
type worker struct {
	cfg     *config.Config
	out     io.Writer
	id      string
	node    *node.Node
	actors  []*actor.PID       // the stage actors of the current run
	tracing *nodeTracing       // the current run's tracing (nil before one)
	meter   *meter.Instruments // the node's metrics (nil: off)
	device  gpu.Device         // where the node's models run (model.device of this node)
	noticed time.Time          // when it last said it is waiting for the learner
}

// findLearner waits until a learner node is among the members and returns
// its coordinator; it says once every few seconds that it is waiting, and
// why, as far as asking the seeds tells. Seeds whose transport never fits
// this node's (TLS on one side only, a certificate refused on either side)
// end the wait when no seed is left that may yet answer: an error
// wrapping node.ErrTLS.
func (w *worker) findLearner(ctx context.Context) (*actor.PID, error) {
	last := time.Now()
	for {
		if ls := w.node.Learners(); len(ls) > 0 {
			return actor.NewPID(ls[0], CoordinatorName), nil
		}
		if time.Since(last) >= waitNoticeEach {
			why, err := w.seedProblems(ctx)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(w.out, "node %s: waiting for a learner of cluster %s at %s%s\n", w.id, w.cfg.Cluster.Name, strings.Join(w.cfg.Cluster.Seeds, ", "), why)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lookEvery):
		}
	}
}

// seedProblems asks the seeds at once (Node.ProbeSeeds: several that
// hang delay the answer by one probe's timeout, not one each) and reads
// their answers with seedVerdict; ctx's error once it ends.
func (w *worker) seedProblems(ctx context.Context) (string, error) {
	errs := w.node.ProbeSeeds(ctx, w.cfg.Cluster.Seeds, w.cfg.Cluster.Name)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return seedVerdict(errs)
}

// seedVerdict reads the answers of the seeds (nil: a learner of this
// node's cluster answers there): why they show no learner, " (REASON;
// REASON)" in the seeds' order, or "" when none has a problem; or, when
// no seed's transport will ever fit this node's, the first one's error
// wrapping node.ErrTLS. A seed that never fits beside one that may yet
// answer (not listening yet, a learner in its warm start) is only named
// among the reasons: the learner may come up at the other.
func seedVerdict(errs []error) (string, error) {
	var why []string
	var never error // the first seed whose transport never fits
	open := 0       // seeds that answer, or may yet
	for _, err := range errs {
		if !errors.Is(err, node.ErrTLS) {
			open++
		} else if never == nil {
			never = err
		}
		if err != nil {
			why = append(why, err.Error())
		}
	}
	switch {
	case never != nil && open == 0:
		return "", never
	case len(why) == 0:
		return "", nil
	}
	return " (" + strings.Join(why, "; ") + ")", nil
}

// serveRun joins the run of the coordinator, starts and registers this
// node's stage actors, and keeps them until the learner is gone (nothing
// listens at its address after a missed heartbeat, or learnerLost missed
// in a row) or drops the node (nil: look for a learner again) or ctx
// ends. A refusal is ErrRefused.
func (w *worker) serveRun(ctx context.Context, coord *actor.PID) error {
	res, err := w.ask(ctx, coord, &messages.JoinRequest{NodeId: w.id, Roles: w.cfg.Cluster.Roles(),
		Build: Build(), Protocol: ProtocolVersion, Address: w.node.Address()})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return w.notAnswered(coord.GetAddress())
	}
	reply, ok := res.(*messages.JoinReply)
	if !ok { // a learner node whose run has not started answers from its dead letters
		w.waiting(coord.GetAddress(), "its run has not started yet")
		return nil
	}
	if !reply.GetAccepted() {
		return fmt.Errorf("%w at %s: %s", ErrRefused, coord.GetAddress(), reply.GetReason())
	}
	defer w.stopActors(ctx)
	reg, err := w.startActors(reply)
	if err != nil {
		return fmt.Errorf("join run %s: %w", reply.GetRunId(), err)
	}
	if _, err := w.ask(ctx, coord, reg); err != nil {
		return nil
	}
	fmt.Fprintf(w.out, "node %s: joined run %s at %s\n", w.id, reply.GetRunId(), coord.GetAddress())
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(heartbeatEvery):
		}
		res, err := w.ask(ctx, coord, &messages.Heartbeat{NodeId: w.id})
		ack, ok := res.(*messages.HeartbeatAck)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil || !ok:
			if node.NothingListens(coord.GetAddress()) { // its run is over, or it was killed: no need to wait out the misses
				w.gone(coord.GetAddress(), "nothing listens there any more")
				return nil
			}
			if missed++; missed >= learnerLost {
				w.gone(coord.GetAddress(), fmt.Sprintf("%d heartbeats unanswered", learnerLost))
				return nil
			}
		case !ack.GetKnown():
			fmt.Fprintf(w.out, "node %s: the learner dropped this node (it stopped answering); joining again\n", w.id)
			return nil
		default:
			missed = 0
		}
	}
}

// gone says that the learner at addr is gone, and how the node can tell.
func (w *worker) gone(addr, why string) {
	fmt.Fprintf(w.out, "node %s: the learner at %s is gone (%s); waiting for a learner\n", w.id, addr, why)
}

// notAnswered handles a join the learner at addr did not answer: it is
// starting, gone, or cannot talk to this node. A transport that does not
// fit (TLS on one side only, a certificate refused on either side) never
// will: that ends the node (an error wrapping node.ErrTLS). Anything else
// (the learner busy, not listening yet or any more, the network) is waited
// out, with a line every few seconds (nil: ask again).
func (w *worker) notAnswered(addr string) error {
	why := "still starting?"
	if err := w.node.CheckPeer(addr); errors.Is(err, node.ErrTLS) {
		return err
	} else if node.Unreachable(err) {
		why = err.Error() + "; that is the address the learner advertises: if this machine cannot reach it, start the learner with --cluster.advertise HOST"
	} else if err != nil {
		why = err.Error()
	}
	w.waiting(addr, why)
	return nil
}

// waiting says, once every few seconds, that the learner at addr does
// not answer yet, and why (as far as this node can tell).
func (w *worker) waiting(addr, why string) {
	if time.Since(w.noticed) >= waitNoticeEach {
		fmt.Fprintf(w.out, "node %s: the learner at %s does not answer yet (%s); asking again\n", w.id, addr, why)
		w.noticed = time.Now()
	}
}

// startActors starts this node's stage actors for the run of reply and
// returns their registration.
func (w *worker) startActors(reply *messages.JoinReply) (*messages.Register, error) {
	s, err := w.joinStages(reply)
	if err != nil {
		return nil, err
	}
	tel := telemetry{tracer: w.tracing.Tracer(), node: w.id, meter: w.meter}
	reg := &messages.Register{NodeId: w.id, Address: w.node.Address()}
	spawn := func(stage messages.Stage, name string, props *actor.Props) error {
		pid, err := w.node.System().Root.SpawnNamed(props, name)
		if err != nil {
			return err
		}
		w.actors = append(w.actors, pid)
		reg.Actors = append(reg.Actors, &messages.StageActor{Stage: stage, Id: pid.GetId()})
		return nil
	}
	roles := w.cfg.Cluster.Roles() // this node's own roles and pool sizes
	for i := range w.cfg.Cluster.Generators {
		if slices.Contains(roles, config.RoleGenerator) {
			id := fmt.Sprintf("generator-%s-%d", w.id, i)
			if err := spawn(messages.Stage_GENERATE, id, newGeneratorProps(id, s.generate, w.device, w.node.Blobs(), tel, newPolicySlot(nil))); err != nil {
				return nil, err
			}
		}
	}
	for i := range w.cfg.Cluster.RewardEvaluators {
		if slices.Contains(roles, config.RoleReward) {
			id := fmt.Sprintf("reward-%s-%d", w.id, i)
			if err := spawn(messages.Stage_REWARD, id, newRewardProps(id, s.reward, tel)); err != nil {
				return nil, err
			}
		}
	}
	if slices.Contains(roles, config.RoleReference) {
		id := "reference-" + w.id
		if err := spawn(messages.Stage_REFERENCE, id, newReferenceProps(id, s.reference, w.device, w.node.Blobs(), tel, nil)); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// joinStages reads the configuration, tokenizer and model dimensions the
// learner sent into this node's stage settings, and starts the run's
// tracing with the learner's trace settings (its collector, sampling and
// service).
func (w *worker) joinStages(reply *messages.JoinReply) (stageSettings, error) {
	cfg, err := config.Parse(reply.GetConfigYaml(), "the learner's configuration")
	if err != nil {
		return stageSettings{}, err
	}
	tok, err := tokenizerFromFiles(reply.GetTokenizerFiles())
	if err != nil {
		return stageSettings{}, err
	}
	model, err := modelFromJSON(reply.GetModelJson())
	if err != nil {
		return stageSettings{}, err
	}
	s, err := workerStages(cfg, model, tok)
	if err != nil {
		return stageSettings{}, err
	}
	if own := w.cfg.Model; own.Device == "cuda" && own.DType != cfg.Model.DType {
		fmt.Fprintf(w.out, "warning: the run's products are %s, this node's GPU's %s: its samples and scores differ from the learner's GPU's; start the node with --model.dtype %s\n",
			cfg.Model.DType, own.DType, cfg.Model.DType)
	}
	if w.tracing, err = w.newTracing(cfg.Trace); err != nil {
		return stageSettings{}, err
	}
	return s, nil
}

// newTracing starts the tracing of a run whose learner traces with t.
// The node's own trace.file, when it has one, takes the place of the
// learner's. The learner's file is a path on the learner's machine: where
// this node cannot open it, the node says so in one line and its spans
// go only to the collector, if any.
func (w *worker) newTracing(t config.Trace) (*nodeTracing, error) {
	if own := w.cfg.Trace.File; own != "" {
		t.File = own
	}
	tr, err := newTracing(context.Background(), t, w.id, w.cfg.Cluster.Roles(), w.out)
	if err == nil || t.File == "" || w.cfg.Trace.File != "" {
		return tr, err
	}
	fmt.Fprintf(w.out, "warning: the learner's %v; this node does not write its spans to a file (give it its own --trace.file)\n", err)
	t.File = ""
	return newTracing(context.Background(), t, w.id, w.cfg.Cluster.Roles(), w.out)
}

// stopActors stops the stage actors of the current run and exports
// their last spans. When ctx has ended (the node was told to stop) it
// waits for neither: an actor busy with a part would hold the node for as
// long as the part takes (the learner sends the part to another node),
// and an unreachable collector for its timeout; the spans get
// exitFlushTime.
func (w *worker) stopActors(ctx context.Context) {
	leaving := ctx.Err() != nil
	for _, pid := range w.actors {
		if leaving {
			w.node.System().Root.Stop(pid)
			continue
		}
		_ = w.node.System().Root.StopFuture(pid).Wait()
	}
	w.actors = nil
	if w.tracing != nil {
		flush := context.Background()
		if leaving {
			var cancel context.CancelFunc
			flush, cancel = context.WithTimeout(flush, exitFlushTime)
			defer cancel()
		}
		w.tracing.Shutdown(flush)
		w.tracing = nil
	}
}

// ask sends msg to pid and returns its answer, or an error once
// askTimeout passes or ctx ends, whichever is first.
func (w *worker) ask(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	return awaitFuture(ctx, w.node.System().Root.RequestFuture(pid, msg, askTimeout))
}
