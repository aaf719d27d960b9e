package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/actors/internal/otlp"
	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/buildinfo"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/messages"
)

// ProtocolVersion is the version of the messages nodes exchange
// (messages/*.proto); nodes of different versions refuse each other.
const ProtocolVersion int32 = 5 // 2: Relay (a reward evaluator hands its Scored to the reference scorer beside it); 3: bf16 weight chunks (TensorChunk.dtype); 4: Chain (a generator hands its Rollouts to a reward evaluator); 5: WeightsOffer (weights fetched from the learner node's blob port)

// Build names this binary's build (buildinfo.ID: the version the
// Makefile stamps and the SHA-256 of the executable). Nodes of different
// builds refuse each other: the numbers of a run must not depend on which
// binary computed them.
func Build() string { return buildinfo.ID() }

// certWarnWithin is how close to its end a node's certificate is said to
// expire at start: a run of a day or more outlives it.
const certWarnWithin = 48 * time.Hour

// startNode starts this process's cluster node for cl (a learner node
// when it has the learner role), with a gRPC batch bound derived from the
// largest message the run can send (messageBound) and proto.actor's
// metrics on mp (nil: off). Configurations whose
// messages cannot fit are refused with a config error.
func startNode(cl config.Cluster, learner bool, bound int, mp metric.MeterProvider, log io.Writer) (*node.Node, error) {
	if err := checkMessageBound(cl.MaxMessageBytes, bound); err != nil {
		return nil, err
	}
	o := node.Options{Name: cl.Name, Host: cl.Host, Port: cl.Port, RemotePort: cl.RemotePort, Seeds: cl.Seeds, Advertise: cl.Advertise,
		Learner: learner, MaxMessageBytes: cl.MaxMessageBytes, BatchSize: cl.MaxMessageBytes / max(bound, 1), Log: log,
		MeterProvider: mp}
	if cl.TLS.CA != "" {
		t, err := node.LoadTLS(cl.TLS.CA, cl.TLS.Cert, cl.TLS.Key)
		if err != nil {
			return nil, err
		}
		o.TLS = t
		if line := t.Expiring(time.Now(), certWarnWithin); line != "" && log != nil {
			fmt.Fprintln(log, "warning: "+line)
		}
	}
	return node.Start(o)
}

// refused says that node id, at address, was refused for reason (kind:
// what the refusal is about, not quoting the node), through o.Refused or
// else on o.Notice.
func (o *ClusterOptions) refused(kind, id, address, reason string) {
	who := "node " + id
	if checkNodeID(id) != nil { // quoted, cut: it may be anything
		who = fmt.Sprintf("node %.64q", id)
	}
	switch {
	case o.Refused != nil:
		o.Refused(kind, who, address, reason)
	case o.Notice != nil:
		fmt.Fprintf(o.Notice, "refused %s at %s: %s\n", who, address, reason)
	}
}

// checkMessageBound refuses a run whose largest message (messageBound)
// does not fit cluster.max_message_bytes (limit).
func checkMessageBound(limit, bound int) error {
	if bound > limit {
		return &config.Error{Key: "cluster.max_message_bytes", Value: fmt.Sprint(limit),
			Reason: fmt.Sprintf("below the largest message of this run (%d bytes): raise it, or lower cluster.weight_chunk_bytes or train.prompts_per_part", bound),
			Err:    config.ErrConflict}
	}
	return nil
}

// messageBound is an upper bound, in bytes, of the largest message nodes
// of a run with settings s exchange: a weight chunk, a part's batch at any
// stage (built at its largest: every prompt and completion at full
// length), or the JoinReply join. gRPC drops a batch over its limit
// without a word (go-deps §11d), so the limit and the batch size are set
// from it.
func messageBound(s *settings, join *messages.JoinReply) int {
	tok := s.tokenizer
	tokenBytes := 1
	for id := range tok.VocabSize() {
		tokenBytes = max(tokenBytes, len(tok.Decode([]int{id})))
	}
	ctx, k, n := s.model.Context, s.step.group, s.step.perPart
	prompt := &messages.Prompt{Index: int32(n), TokenIds: make([]int32, ctx), Seed: ^uint64(0),
		Text: string(make([]byte, ctx*tokenBytes)), Answer: string(make([]byte, 4096))}
	for i := range prompt.TokenIds {
		prompt.TokenIds[i] = int32(s.model.Vocab)
	}
	t := s.stages.generate.sample.MaxNewTokens
	ro := &messages.Rollouts{Meta: messages.NewMeta(join.GetRunId(), 1<<40, string(make([]byte, 256)), 1<<40), NumGenerations: int32(k)}
	for i := range n {
		ro.Prompts = append(ro.Prompts, prompt)
		for range k {
			r := &messages.Rollout{PromptIndex: int32(i), TokenIds: prompt.TokenIds[:t], Logp: make([]float32, t),
				Entropy: make([]float32, t), FinishReason: messages.FinishReason_LENGTH, PolicyVersion: 1 << 40,
				GeneratorId: string(make([]byte, 256)), Text: string(make([]byte, t*tokenBytes))}
			ro.Rollouts = append(ro.Rollouts, r)
		}
	}
	fns := s.stages.reward.fns
	names := make([]string, len(fns))
	for i, f := range fns {
		names[i] = f.Name
	}
	sc := &messages.Scored{Meta: ro.Meta, Rollouts: ro, RewardNames: names, RewardWeights: make([]float64, len(names)),
		Rewards: make([]float64, n*k*len(names)), Truncated: make([]bool, n*k)}
	rs := &messages.RefScored{Meta: ro.Meta, Scored: sc, RefLogpSum: make([]float64, n*k)}
	for range n * k {
		rs.Ref = append(rs.Ref, &messages.TokenLogprobs{Logp: make([]float32, t)})
	}
	chunk := s.pipeline.ChunkBytes + 64<<10 // tensor data plus names and shapes
	sizes := []int{proto.Size(rs), chunk, proto.Size(join)}
	return slices.Max(sizes)*5/4 + 64<<10 // 25% and 64 KiB for headers, trace context and batch framing
}

// joinReply is what the learner of run runID sends every admitted node:
// the run id, its configuration, tokenizer and model dimensions.
func joinReply(s *settings, runID string) (*messages.JoinReply, error) {
	model, err := json.Marshal(s.model)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizerFiles(s.tokenizer)
	if err != nil {
		return nil, err
	}
	return &messages.JoinReply{RunId: runID, ConfigYaml: s.record.config, TokenizerFiles: tok, ModelJson: model}, nil
}

// tokenizerFiles are the files tok saves into a checkpoint
// (tokenizer.json and, for a Hugging Face tokenizer, its configuration
// files), by name.
func tokenizerFiles(tok tokenizer.Tokenizer) (map[string][]byte, error) {
	saver, ok := tok.(interface{ Save(dir string) error })
	if !ok {
		return nil, fmt.Errorf("tokenizer %s cannot be sent to worker nodes", tok.Name())
	}
	dir, err := os.MkdirTemp("", "mgrpo-tokenizer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := saver.Save(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// tokenizerFromFiles loads the tokenizer whose files tokenizerFiles read.
func tokenizerFromFiles(files map[string][]byte) (tokenizer.Tokenizer, error) {
	dir, err := os.MkdirTemp("", "mgrpo-tokenizer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, data := range files {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, fmt.Errorf("tokenizer file name %q from the learner", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return tokenizer.Load(dir)
}

// modelFromJSON reads the model dimensions a JoinReply carries.
func modelFromJSON(data []byte) (gpu.Config, error) {
	var c gpu.Config
	if err := json.Unmarshal(data, &c); err != nil {
		return gpu.Config{}, fmt.Errorf("model dimensions from the learner: %w", err)
	}
	return c, nil
}

// loopbackHost reports whether host is a loopback address or name.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// nodeTracing is a node's tracer provider and the id its spans carry.
type nodeTracing struct {
	*trace.Provider
	node string
}

// newTracing starts the tracing of a node named node with roles, from
// the trace section t; a trace.file that fails on a write says so on out
// once.
func newTracing(ctx context.Context, t config.Trace, node string, roles []string, out io.Writer) (*nodeTracing, error) {
	p, err := trace.New(ctx, trace.Options{ServiceName: t.ServiceName, InstanceID: node, Version: Build(), Roles: roles,
		OTLPEndpoint: t.OTLPEndpoint, Protocol: t.Protocol, File: t.File, SampleRatio: t.SampleRatio, Warn: out})
	if err != nil {
		return nil, err
	}
	return &nodeTracing{Provider: p, node: node}, nil
}

// ReportTelemetryErrors makes the errors of the process's OpenTelemetry
// exporters (a collector down, a port that speaks another protocol)
// lines on out: the first at once, then at most one a minute saying how
// many were not written. The handler is the process's: main calls this
// once.
func ReportTelemetryErrors(out io.Writer) {
	otel.SetErrorHandler(otlp.NewExportErrors(out))
}

// newMetrics starts the metrics of a node named node with roles, from
// cfg's output and trace sections, and says where Prometheus scrapes
// them.
func newMetrics(ctx context.Context, cfg *config.Config, node string, roles []string, out io.Writer) (*meter.Provider, error) {
	p, err := meter.New(ctx, meter.Options{ServiceName: cfg.Trace.ServiceName, InstanceID: node, Version: Build(), Roles: roles,
		Host: cfg.Cluster.Host, PrometheusPort: cfg.Output.PrometheusPort, Pprof: cfg.Output.Pprof, OTLPEndpoint: cfg.Output.OTLPMetricsEndpoint, Protocol: cfg.Trace.Protocol})
	if err != nil {
		return nil, err
	}
	if url := p.PrometheusURL(); url != "" {
		fmt.Fprintf(out, "metrics for Prometheus at %s\n", url)
	}
	if url := p.ProfilesURL(); url != "" {
		fmt.Fprintf(out, "Go profiles at %s (go tool pprof %sprofile)\n", url, url)
		if w := profilesWarning(cfg.Cluster.Host); w != "" {
			fmt.Fprintln(out, w)
		}
	}
	return p, nil
}

// profilesWarning is the line a node serving Go's profiles on host says
// when host is not a loopback one: the profiles are plain HTTP, without
// the cluster's TLS, and a goroutine dump or a CPU profile is anyone's
// who reaches the port.
func profilesWarning(host string) string {
	if loopbackHost(host) {
		return ""
	}
	return fmt.Sprintf("warning: output.pprof serves Go's profiles in plain HTTP, outside the cluster's TLS, to whoever reaches %s: firewall output.prometheus_port, or turn output.pprof off when done", host)
}

// newNodeID names this process in a cluster and in traces: its first
// role, host and process id, and a random suffix (a restarted process on
// the same host has another id).
func newNodeID(role string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%s-%d-%04x", role, host, os.Getpid(), rand.Uint32()&0xffff)
}
