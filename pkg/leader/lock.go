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

package leader

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Gate decides when this replica may try to acquire a Lease that is free.
// The gate of sharding uses it to spread shards over replicas.
type Gate interface {
	// Begin lets an attempt to acquire the Lease go ahead, or says why
	// not; after a nil error, End must be called with the outcome.
	Begin() error
	// End records the outcome of the attempt Begin let through.
	End(acquired bool)
	// SeenHeld is told each time the Lease is seen renewed by another
	// holder.
	SeenHeld()
}

// fencingLock is the leader elector's Lease lock, telling the write fence
// what the elector learns: each successful acquisition or renewal that a
// standby can see, with the moment its request was sent (before the API
// server can have stored it, so before any standby can have seen it), and
// each sight of the Lease held by someone else. It adds no request of its
// own. Like the lock it wraps, it is not safe for concurrent use: only the
// elector's goroutine calls it. (Run's release, once the elector has
// stopped, uses the lock it wraps.)
type fencingLock struct {
	resourcelock.Interface
	fence *Fence
	clock clock.PassiveClock
	// acquired is set, by the elector's goroutine, once this process has
	// held the Lease; Run reads it once the elector has stopped, to know
	// whether there is anything to release. Atomic, so that a reader
	// need not know whether the elector still runs.
	acquired atomic.Bool
	// stored is the Lease as a standby compares it (see standbyView), as
	// last read or written; the elector's goroutine alone touches it.
	stored []byte
	// gate, if not nil, decides when this replica may try to acquire the
	// Lease.
	gate Gate
}

// newLock is the Lease lock of cfg, through leases, reporting to fence.
// It is the only place a Lease lock is built, for the process's Lease as
// for each shard's.
func newLock(cfg Config, leases coordinationv1client.LeasesGetter, fence *Fence) *fencingLock {
	lock := &resourcelock.LeaseLock{
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		Labels:     cfg.Labels,
	}
	lock.LeaseMeta.Namespace, lock.LeaseMeta.Name = cfg.Namespace, cfg.Name
	return &fencingLock{Interface: lock, fence: fence, clock: cfg.Clock, gate: cfg.Gate}
}

// Get reads the Lease; another holder means leadership is lost.
func (l *fencingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil {
		if l.gate != nil && rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() && !bytes.Equal(raw, l.stored) {
			l.gate.SeenHeld()
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
		if err := l.gate.Begin(); err != nil {
			return err
		}
	}
	sent := l.clock.Now()
	err := send(ctx, rec)
	if acquiring {
		l.gate.End(err == nil)
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
