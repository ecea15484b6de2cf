package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/leader"
)

// With Config.Shards > 1 the Books are split by namespace hash into that
// many shards (shards.go), each with a Lease of its own. The process runs a
// shardSlot per shard: a leader elector on the shard's Lease and, while it
// holds the Lease, the shard's informers and controller behind a write fence
// of the shard's own. Losing one shard's Lease stops that shard's writes and
// informers and nothing else; the slot then stands by for the shard again.
// Which replica takes which shard is the shardGate's doing. docs/sharding.md
// tells the whole story.

// shardSlot is one shard as this replica competes for it.
type shardSlot struct {
	shard Shard
	m     *manager
	turn  *shardTurn

	mu sync.Mutex
	// fence and work are those of the current attempt; nil between two.
	fence *leader.Fence
	work  *shardWork
}

// afterShardLoss is what a slot does after losing its shard's Lease.
const afterShardLoss = "another replica may be syncing this shard's Books now; its caches are dropped and this replica stands by for it again"

// run competes for the shard until ctx ends (then the shard is drained and
// its Lease released, if held) or something fails that a new attempt would
// not mend. A loss of the Lease starts a new attempt, as a standby.
func (s *shardSlot) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for {
		err := s.attempt(ctx)
		if ctx.Err() != nil || !errors.Is(err, leader.ErrLost) {
			return err
		}
		logger.Info("Lost a shard; standing by for it again", "shard", s.shard.Index, "err", err)
	}
}

// attempt is one life of the shard in this replica: a fresh elector and
// fence, fenced clients, a Lease lock that waits for its turn (the gate),
// then the shard's work until ctx ends or the Lease is lost.
func (s *shardSlot) attempt(ctx context.Context) error {
	m := s.m
	cfg := m.leaseConfig(ShardLeaseName(m.cfg.LeaderElection.ID, s.shard.Index), afterShardLoss)
	cfg.Gate = s.turn
	elector, err := leader.New(cfg, m.clients.leases)
	if err != nil {
		return err
	}
	w, err := newWriters(m.clients.base, elector.Fence())
	if err != nil {
		return err
	}
	work := &shardWork{shard: s.shard, reads: m.clients, writers: w, limiter: m.eventLimiter,
		resync: m.cfg.ResyncPeriod, opts: m.cfg.Controller, workers: m.cfg.Workers}
	s.set(elector.Fence(), work)
	defer s.set(nil, nil)
	defer s.turn.released()
	return elector.Run(ctx, work)
}

func (s *shardSlot) set(fence *leader.Fence, work *shardWork) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence, s.work = fence, work
}

// current returns the fence and work of the current attempt, nil if none.
func (s *shardSlot) current() (*leader.Fence, *shardWork) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fence, s.work
}

// held reports whether this replica holds the shard and may write to it.
func (s *shardSlot) held() bool {
	fence, _ := s.current()
	return fence != nil && fence.Leading()
}

// shardRanges are the shards' hash ranges: equal, or at the boundaries
// given.
func (m *manager) shardRanges() ([]Shard, error) {
	if len(m.cfg.ShardBoundaries) == 0 {
		return Shards(m.cfg.Shards), nil
	}
	shards, err := ShardsAt(m.cfg.ShardBoundaries)
	if err != nil {
		return nil, err
	}
	if len(shards) != m.cfg.Shards {
		return nil, fmt.Errorf("%d shard boundaries make %d shards, not %d: give one fewer boundary than shards",
			len(m.cfg.ShardBoundaries), len(shards), m.cfg.Shards)
	}
	return shards, nil
}

// planShards prepares the slots (sharded steps' "connect").
func (m *manager) planShards() {
	m.eventLimiter = eventLimiter(m.cfg.EventQPS, m.cfg.EventBurst)
	gate := newShardGate(m.cfg.LeaderElection.LeaseDuration, m.clock)
	for _, sh := range m.shards {
		m.slots = append(m.slots, &shardSlot{shard: sh, m: m, turn: gate.turn(sh.Index)})
	}
}

// workShards runs every slot until ctx ends and each has drained and
// released its shard. A slot that fails for another reason than a lost
// Lease stops the others too (gracefully), and Run returns its error: the
// process exits, to be restarted.
func (m *manager) workShards(ctx context.Context) error {
	le := m.cfg.LeaderElection
	klog.FromContext(ctx).Info("Starting Book controller", "namespace", namespaceOrAll(m.cfg.Namespace),
		"workers", m.cfg.Workers, "shards", m.cfg.Shards, "boundaries", m.cfg.ShardBoundaries, "leaderElection", le.Enabled, "identity", le.Identity,
		"leases", le.Namespace+"/"+ShardLeaseName(le.ID, 0)+"..")
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, len(m.slots))
	var wg sync.WaitGroup
	for i, s := range m.slots {
		wg.Go(func() {
			if errs[i] = s.run(ctx); errs[i] != nil {
				errs[i] = fmt.Errorf("shard %d: %w", s.shard.Index, errs[i])
				stop()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// shardsSynced is /readyz with shards: every shard held has synced its
// caches. A replica holding none is ready: it is a spare.
func (m *manager) shardsSynced() bool {
	for _, s := range m.slots {
		if _, work := s.current(); s.held() && (work == nil || !work.synced()) {
			return false
		}
	}
	return true
}

// shardsHealthy is /healthz with shards: it fails while a shard's holder
// is past its renew deadline without having noticed (see
// leader.Fence.Healthy). A lost shard is not a failure: its slot stands by
// again.
func (m *manager) shardsHealthy() error {
	for _, s := range m.slots {
		if fence, _ := s.current(); fence != nil && fence.Cause() == nil {
			if err := fence.Healthy(); err != nil {
				return fmt.Errorf("shard %d: %w", s.shard.Index, err)
			}
		}
	}
	return nil
}
