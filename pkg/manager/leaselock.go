package manager

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// fencingLock is the leader elector's Lease lock, telling the write fence
// what the elector learns: each successful acquisition or renewal, with the
// moment its request was sent (before the API server can have stored it, so
// before any standby can have seen it), and each sight of the Lease held by
// someone else. It adds no request of its own.
type fencingLock struct {
	resourcelock.Interface
	fence *writeFence
	clock clock.PassiveClock
	// acquired is set once this process has held the Lease, so that a
	// shutdown knows whether there is anything to release.
	acquired atomic.Bool
}

// Get reads the Lease; another holder means leadership is lost.
func (l *fencingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec.HolderIdentity != l.Identity() {
		l.fence.taken(rec.HolderIdentity)
	}
	return rec, raw, err
}

// Create creates the Lease held by us: an acquisition.
func (l *fencingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := l.clock.Now()
	err := l.Interface.Create(ctx, rec)
	l.held(err, rec, sent)
	return err
}

// Update writes the Lease: an acquisition or a renewal when we are the
// holder.
func (l *fencingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := l.clock.Now()
	err := l.Interface.Update(ctx, rec)
	l.held(err, rec, sent)
	return err
}

func (l *fencingLock) held(err error, rec resourcelock.LeaderElectionRecord, sent time.Time) {
	if err != nil || rec.HolderIdentity != l.Identity() {
		return
	}
	l.acquired.Store(true)
	l.fence.renewed(sent)
}
