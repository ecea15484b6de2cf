/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"ydzs.io/book-controller/pkg/leader"
)

// A sharded replica runs a slot per shard: a leader elector on the shard's
// Lease and, while it holds the Lease, the shard's informers and
// controller behind a write fence of the shard's own. Losing one shard's
// Lease stops that shard's writes and informers and nothing else; the slot
// then stands by for the shard again. Which replica takes which shard is
// the gate's doing.

// Config is what the slots of a replica share.
type Config struct {
	// Shards are the hash ranges, a slot each.
	Shards []Shard
	// Lease is every shard's leader election. Its Name is the base of the
	// shards' Lease names (LeaseName); each slot sets Gate and AfterLoss.
	Lease leader.Config
	// Leases reads and writes the shards' Leases; it must not be fenced.
	Leases coordinationv1client.LeasesGetter
	// Build builds the stack of shard s when its Lease is acquired, with
	// writing clients behind fence (leader.Fence.Wrap).
	Build func(ctx context.Context, s Shard, fence *leader.Fence) (Stack, error)
}

// Replica is this replica's part in a sharded deployment: a slot per shard.
type Replica struct {
	cfg Config
	// slots are fixed by NewReplica; what changes in a slot is guarded by
	// the slot's own lock.
	slots []*slot
	// guard keeps the slots from taking shards while replicas of another
	// shard count hold some.
	guard *countGuard
}

// NewReplica prepares a slot per shard, sharing one gate.
func NewReplica(cfg Config) *Replica {
	clk := cfg.Lease.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	g := newGate(cfg.Lease.LeaseDuration, clk)
	r := &Replica{cfg: cfg}
	r.guard = newCountGuard(&r.cfg, clock.RealClock{})
	g.guard = r.guard
	for _, s := range cfg.Shards {
		r.slots = append(r.slots, &slot{shard: s, cfg: &r.cfg, turn: g.turnFor(s.Index)})
	}
	return r
}

// Run runs every slot until ctx ends and each has drained and released
// its shard. A slot that fails for another reason than a lost Lease stops
// the others too (gracefully), and Run returns its error: the process
// exits, to be restarted.
func (r *Replica) Run(ctx context.Context) error {
	r.guard.logger = klog.FromContext(ctx)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, len(r.slots))
	var wg sync.WaitGroup
	for i, s := range r.slots {
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

// Synced is /readyz with shards: every shard held has synced its caches.
// A replica holding none is ready: it is a spare.
func (r *Replica) Synced() bool {
	for _, s := range r.slots {
		if fence, work := s.current(); held(fence) && (work == nil || !work.synced()) {
			return false
		}
	}
	return true
}

// Healthy is /healthz with shards: it fails while a shard's holder is past
// its renew deadline without having noticed (see leader.Fence.Healthy). A
// lost shard is not a failure: its slot stands by again.
func (r *Replica) Healthy() error {
	for _, s := range r.slots {
		if fence, _ := s.current(); fence != nil && fence.Cause() == nil {
			if err := fence.Healthy(); err != nil {
				return fmt.Errorf("shard %d: %w", s.shard.Index, err)
			}
		}
	}
	return nil
}

// LeasesOfOtherCount is the number of shard Leases that replicas with
// another --shards held, unexpired, at this replica's last attempt to take
// a shard: while it is not 0, this replica takes none.
func (r *Replica) LeasesOfOtherCount() int { return int(r.guard.blocking.Load()) }

// Status is one shard as this replica sees it.
type Status struct {
	Shard Shard
	// Lease is the name of the shard's Lease.
	Lease string
	// Held: this replica holds the Lease and may write to the shard.
	Held bool
	// CachedBooks and CachedConfigMaps are the number of Books and of
	// ConfigMaps in the shard's caches, if Cached: there are caches while
	// the shard's work runs.
	CachedBooks, CachedConfigMaps int
	Cached                        bool
}

// Status reports every shard, for the metrics.
func (r *Replica) Status() []Status {
	out := make([]Status, len(r.slots))
	for i, s := range r.slots {
		fence, work := s.current()
		out[i] = Status{Shard: s.shard, Lease: LeaseName(r.cfg.Lease.Name, s.shard.Index), Held: held(fence)}
		if work != nil {
			out[i].CachedBooks, out[i].CachedConfigMaps, out[i].Cached = work.cached()
		}
	}
	return out
}

// slot is one shard as this replica competes for it.
type slot struct {
	shard Shard
	cfg   *Config
	turn  *turn

	// mu guards fence and work, those of the current attempt (nil between
	// two): written by run's goroutine as each attempt starts and ends,
	// read by the probes and the metrics scrape (current).
	mu    sync.Mutex
	fence *leader.Fence
	work  *work
}

// afterLoss is what a slot does after losing its shard's Lease.
const afterLoss = "another replica may be syncing this shard's Books now; its caches are dropped and this replica stands by for it again"

// run competes for the shard until ctx ends (then the shard is drained and
// its Lease released, if held) or something fails that a new attempt would
// not mend. A loss of the Lease starts a new attempt, as a standby.
func (s *slot) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for {
		err := s.attempt(ctx)
		switch {
		case ctx.Err() != nil:
			return err
		case errors.Is(err, errGaveBack):
			logger.Info("Gave a shard back right after taking it; standing by for it again", "shard", s.shard.Index, "err", err)
		case errors.Is(err, leader.ErrLost):
			logger.Info("Lost a shard; standing by for it again", "shard", s.shard.Index, "err", err)
		default:
			return err
		}
	}
}

// attempt is one life of the shard in this replica: a fresh elector, with
// its fence and a Lease lock that waits for its turn (the gate), then the
// shard's work until ctx ends or the Lease is lost.
func (s *slot) attempt(ctx context.Context) error {
	cfg := s.cfg.Lease
	cfg.Name = LeaseName(cfg.Name, s.shard.Index)
	cfg.Gate, cfg.AfterLoss = s.turn, afterLoss
	cfg.Labels = s.turn.gate.guard.labels()
	elector, err := leader.New(cfg, s.cfg.Leases)
	if err != nil {
		return err
	}
	fence := elector.Fence()
	w := &work{shard: s.shard, check: s.turn.gate.guard.check, build: func(ctx context.Context) (Stack, error) {
		return s.cfg.Build(ctx, s.shard, fence)
	}}
	s.set(fence, w)
	defer s.set(nil, nil)
	defer s.turn.released()
	return elector.Run(ctx, w)
}

func (s *slot) set(fence *leader.Fence, w *work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence, s.work = fence, w
}

// current returns the fence and work of the current attempt, nil if none.
func (s *slot) current() (*leader.Fence, *work) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fence, s.work
}

// held reports whether fence, a slot's current one, lets the shard be
// written to: this replica holds the shard.
func held(fence *leader.Fence) bool { return fence != nil && fence.Leading() }
