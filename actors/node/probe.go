package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// ProbeSeed asks the membership port at seed (host:port) what it is, as a
// worker looking for its learner does, and returns why no learner of
// cluster can be found there: the host unknown, nothing listening, no
// answer, not a learner's membership port, a learner of another
// cluster.name. nil means a learner of cluster answers there. It waits at
// most checkTimeout.
func ProbeSeed(ctx context.Context, seed, cluster string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+seed+"/_health", nil)
	if err != nil {
		return fmt.Errorf("%s: not HOST:PORT: %w", seed, err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no proxy: the seed is dialled, as the membership does
	resp, err := client.Do(req)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) { // a hung port, or a dial no one answers
		return fmt.Errorf("%s: no answer within %s", seed, checkTimeout)
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var oe *net.OpError // without the address the line names already
		if errors.As(err, &oe) {
			err = fmt.Errorf("%s: %w", oe.Op, oe.Err)
		}
		return fmt.Errorf("%s: %w", seed, err)
	}
	defer resp.Body.Close()
	var m automanaged.NodeModel
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answers HTTP %d: not a learner's membership port (its cluster.port)", seed, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil || m.ID == "" {
		return fmt.Errorf("%s answers, but not as a learner's membership port (its cluster.port) does", seed)
	}
	if m.ClusterName != cluster {
		return fmt.Errorf("%s is a learner of cluster %q, not %q: give both the same cluster.name", seed, m.ClusterName, cluster)
	}
	if !slices.Contains(m.Kinds, LearnerKind) {
		return fmt.Errorf("%s is a member of cluster %q without its learner yet", seed, cluster)
	}
	return nil
}

// maxProbes bounds the seeds ProbeSeeds asks at once.
const maxProbes = 8

// ProbeSeeds asks each of seeds what ProbeSeed asks, up to maxProbes at
// once, each within its own checkTimeout, and returns the answers in the
// seeds' order (nil where a learner of cluster answers). Seeds that hang
// cost about one checkTimeout together, not one each.
func ProbeSeeds(ctx context.Context, seeds []string, cluster string) []error {
	return probeSeeds(ctx, seeds, cluster, maxProbes)
}

// probeSeeds is ProbeSeeds with at most limit probes at once.
func probeSeeds(ctx context.Context, seeds []string, cluster string, limit int) []error {
	errs := make([]error, len(seeds))
	slots := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = ProbeSeed(ctx, seed, cluster)
		})
	}
	wg.Wait()
	return errs
}
