package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// fencingLock is the leader elector's Lease lock, telling the write fence
// what the elector learns: each successful acquisition or renewal that a
// standby can see, with the moment its request was sent (before the API
// server can have stored it, so before any standby can have seen it), and
// each sight of the Lease held by someone else. It adds no request of its
// own. Like the lock it wraps, it is used by one goroutine at a time.
type fencingLock struct {
	resourcelock.Interface
	fence *writeFence
	clock clock.PassiveClock
	// acquired is set once this process has held the Lease, so that a
	// shutdown knows whether there is anything to release.
	acquired atomic.Bool
	// stored is the Lease as a standby compares it (see standbyView), as
	// last read or written.
	stored []byte
	// gate, with shards, decides when this replica may try to acquire the
	// Lease (see shardGate); nil lets every attempt through.
	gate *shardTurn
}

// Get reads the Lease; another holder means leadership is lost.
func (l *fencingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil {
		if l.gate != nil && rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() && !bytes.Equal(raw, l.stored) {
			l.gate.seenHeld()
		}
		l.stored = raw
		if rec.HolderIdentity != l.Identity() {
			l.fence.taken(rec.HolderIdentity)
		}
	}
	return rec, raw, err
}

// Create creates the Lease held by us: an acquisition.
func (l *fencingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.Interface.Create)
}

// Update writes the Lease: an acquisition or a renewal when we are the
// holder.
func (l *fencingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.Interface.Update)
}

// write sends a write of the Lease. An attempt to acquire it passes the
// gate first, if there is one.
func (l *fencingLock) write(ctx context.Context, rec resourcelock.LeaderElectionRecord,
	send func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	acquiring := l.gate != nil && !l.acquired.Load() && rec.HolderIdentity == l.Identity()
	if acquiring {
		if err := l.gate.begin(); err != nil {
			return err
		}
	}
	sent := l.clock.Now()
	err := send(ctx, rec)
	if acquiring {
		l.gate.end(err == nil)
	}
	l.held(err, rec, sent)
	return err
}

// held reports a successful write of rec that names us to the fence, if a
// standby can tell it from the Lease before it.
//
// A standby times a leader's Lease from the last moment it saw the Lease
// change, and it compares Leases as client-go's lock presents them: with
// times in whole seconds. A renewal within the same second as the one
// before looks to it like no renewal at all (with a retry period under a
// second, every other one), so it must not extend how long we may write.
func (l *fencingLock) held(err error, rec resourcelock.LeaderElectionRecord, sent time.Time) {
	if err != nil || rec.HolderIdentity != l.Identity() {
		return
	}
	l.acquired.Store(true)
	view := standbyView(rec)
	visible := !bytes.Equal(view, l.stored)
	l.stored = view
	if visible {
		l.fence.renewed(sent)
	}
}

// standbyView is rec as a standby's elector will compare it, having read it
// back from the Lease: what resourcelock.LeaseLock.Get returns as raw bytes.
func standbyView(rec resourcelock.LeaderElectionRecord) []byte {
	spec := resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	view, err := json.Marshal(resourcelock.LeaseSpecToLeaderElectionRecord(&spec))
	if err != nil {
		return nil // cannot happen: the record is plain data
	}
	return view
}
