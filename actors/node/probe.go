package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
)

// ProbeSeed asks the membership port at seed (host:port) what it is, as a
// worker looking for its learner does, with t's TLS (nil: plaintext), and
// returns why no learner of cluster can be found there: the host unknown,
// nothing listening, no answer, not a learner's membership port, a learner
// of another cluster.name, or a transport that never fits (an error
// wrapping ErrTLS that names the certificate's fault, as CheckPeer does:
// a worker ends on it). nil means a learner of cluster answers there. It
// waits at most checkTimeout, and as long again to name a TLS fault.
func ProbeSeed(ctx context.Context, seed, cluster string, t *TLSConfigs) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	m, err := fetchMember(ctx, memberClient(t, false), seed)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) { // a hung port, or a dial no one answers
		return fmt.Errorf("%s: no answer within %s", seed, checkTimeout)
	}
	if err != nil {
		return probeProblem(seed, err, t)
	}
	if m.ClusterName != cluster {
		return fmt.Errorf("%s is a learner of cluster %q, not %q: give both the same cluster.name", seed, m.ClusterName, cluster)
	}
	if !slices.Contains(m.Kinds, LearnerKind) {
		return fmt.Errorf("%s is a member of cluster %q without its learner yet", seed, cluster)
	}
	return nil
}

// probeProblem reads a failed request for seed's member document: a
// plaintext request refused by a port under TLS, or a TLS fault (the
// verdicts of both sides, as CheckPeer reads them), wraps ErrTLS; a
// network failure or an answer that is not a member document is said as
// is.
func probeProblem(seed string, err error, t *TLSConfigs) error {
	if ae, ok := errors.AsType[answerError](err); ok {
		return fmt.Errorf("%s %w", seed, ae)
	}
	if errors.Is(err, errPlainAtTLS) {
		return fmt.Errorf("%w: %s uses mutual TLS: give this node cluster.tls.ca, .cert and .key", ErrTLS, seed)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if t != nil {
		if p := tlsProblem(seed, err, own(t)); errors.Is(p, ErrTLS) {
			if both := checkTLS(seed, t, membershipALPN); errors.Is(both, ErrTLS) {
				return both
			}
			return p
		}
	} else if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return fmt.Errorf("%w: %s uses mutual TLS: give this node cluster.tls.ca, .cert and .key", ErrTLS, seed)
	}
	var oe *net.OpError // without the address the line names already
	if errors.As(err, &oe) {
		err = fmt.Errorf("%s: %w", oe.Op, oe.Err)
	}
	return fmt.Errorf("%s: %w", seed, err)
}

// maxProbes bounds the seeds ProbeSeeds asks at once.
const maxProbes = 8

// ProbeSeeds asks each of seeds what ProbeSeed asks, up to maxProbes at
// once, each within its own checkTimeout, and returns the answers in the
// seeds' order (nil where a learner of cluster answers). Seeds that hang
// cost about one checkTimeout together, not one each.
func ProbeSeeds(ctx context.Context, seeds []string, cluster string, t *TLSConfigs) []error {
	return probeSeeds(ctx, seeds, cluster, t, maxProbes)
}

// ProbeSeeds is ProbeSeeds with this node's transport security.
func (n *Node) ProbeSeeds(ctx context.Context, seeds []string, cluster string) []error {
	return ProbeSeeds(ctx, seeds, cluster, n.tls)
}

// probeSeeds is ProbeSeeds with at most limit probes at once.
func probeSeeds(ctx context.Context, seeds []string, cluster string, t *TLSConfigs, limit int) []error {
	errs := make([]error, len(seeds))
	slots := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = ProbeSeed(ctx, seed, cluster, t)
		})
	}
	wg.Wait()
	return errs
}
