package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// An evicting maxmemory-policy deletes keys under memory pressure, and an
// evicted key is a lost or corrupted run. New refuses such a policy, but an
// operator can change it on a running server (CONFIG SET), so Claim reads it
// again every Options.PolicyCheckInterval: while it is not noeviction (and
// Options.AllowEvictingPolicy is not set), Claim fails with an error that
// names the policy, logged at error level once per episode, and no new
// work is taken onto a server that may evict it. Runs already leased may
// finish: only Claim is refused.

// policyGate is Claim's view of the server's maxmemory-policy.
type policyGate struct {
	allow    bool
	interval time.Duration

	mu      sync.Mutex
	checked time.Time // when the policy was last read; guarded by mu, as are the rest
	policy  string    // as last read; "" when CONFIG is not permitted
	refused bool      // an episode of refusals is under way (logged)
}

// set records a policy read at Open.
func (g *policyGate) set(policy string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.policy, g.checked = policy, time.Now()
}

// claimAllowed returns nil when Claim may take work: the policy is
// noeviction (or unknown, or evicting is allowed). It reads the policy
// again when the last reading is older than the interval; a failed reading
// keeps the last verdict, and is tried again at the next Claim.
func (s *Store) claimAllowed(ctx context.Context) error {
	g := &s.gate
	if g.allow {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.checked) >= g.interval {
		cctx, cancel := s.bound(ctx)
		start := time.Now()
		res, err := s.client.ConfigGet(cctx, "maxmemory-policy").Result()
		err = s.outcome(cctx, start, "config get maxmemory-policy", err)
		cancel()
		switch {
		case err == nil:
			g.policy, g.checked = res["maxmemory-policy"], time.Now()
		case answered(err):
			// CONFIG not permitted (managed Redis): New warned already.
			g.policy, g.checked = "", time.Now()
		}
	}
	if g.policy == "" || g.policy == "noeviction" {
		if g.refused {
			g.refused = false
			s.logger.Warn("redisstore: maxmemory-policy is noeviction again; claiming resumes", "server", s.host)
		}
		return nil
	}
	err := fmt.Errorf("server %s has maxmemory-policy %q, not noeviction: it may evict keys, and an evicted key is a lost or corrupted run, so no new work is claimed until the policy is noeviction again (CONFIG SET maxmemory-policy noeviction)",
		s.host, g.policy)
	if !g.refused {
		g.refused = true
		s.logger.Error("redisstore: refusing to claim: "+err.Error(), "server", s.host, "maxmemory-policy", g.policy)
	}
	return err
}
