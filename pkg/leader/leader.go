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

// Package leader runs work only while this process holds a
// coordination.k8s.io Lease, and keeps it from writing to the API server
// once it can no longer prove that it does.
//
// It is client-go's leader elector (k8s.io/client-go/tools/leaderelection)
// with three things added: a write fence (Fence) around every client that
// writes, which closes at the renew deadline of the last renewal a standby
// could see, whether or not the elector has noticed; a Lease lock (lock.go)
// that tells the fence what the elector learns; and a run loop (Elector.Run)
// that stops in an order a successor can rely on: on a shutdown the work
// drains, the fence closes, the writes in flight are answered and only then
// is the Lease released; on a loss the fence has already closed and the
// work is aborted. pkg/manager runs one Elector for the whole process, or
// one per shard (pkg/shard). // fork:line shards
package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrLost is wrapped by Run's error when this process stopped holding the
// Lease without being asked to.
var ErrLost = errors.New("lost leader election")

// Config is one Lease and how to compete for it.
type Config struct {
	// Namespace and Name are the Lease's.
	Namespace, Name string
	// Identity names this replica in the Lease.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; see
	// k8s.io/client-go/tools/leaderelection. The fence also refuses every
	// write once RenewDeadline has passed since the last successful
	// renewal a standby could see was sent.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// AfterLoss ends the error of a loss: what the process does next.
	AfterLoss string
	// Labels are set on the Lease by each acquisition and renewal, in the
	// same write (a sharded replica records its shard count there).
	Labels map[string]string
	// Gate, if not nil, decides when this replica may try to acquire the
	// Lease (sharding spreads shards over replicas with it).
	Gate Gate
	// Refused counts the writes the fence refuses; nil counts none.
	Refused prometheus.Counter
	// Clock times the fence; nil is the real clock. client-go's elector
	// keeps its own, real, clock.
	Clock clock.WithDelayedExecution
}

// Work is what runs while the Lease is held.
type Work interface {
	// Run works until ctx ends and the work has drained, or until Abort.
	Run(ctx context.Context) error
	// Abort stops the work at once, or keeps Run from starting it.
	Abort(cause error)
}

// Elector competes for one Lease, once: Run may be called once, and its
// fence only moves forward, so a new attempt after a loss takes a new
// Elector (as each shard's slot does).
type Elector struct {
	cfg     Config
	fence   *Fence
	lock    *fencingLock
	elector *leaderelection.LeaderElector
	// elected is closed by the elector's OnStartedLeading (on a goroutine
	// the elector starts); Run waits on it. Nothing else touches it.
	elected chan struct{}
	// logger is Run's: written by Run before it starts the elector, read
	// by the elector's callbacks, on goroutines the elector starts.
	logger klog.Logger
}

// New builds the Lease lock, the fence and client-go's elector for cfg.
// leases is the client that reads and writes the Lease; it must not be
// fenced: it must acquire, renew and release.
func New(cfg Config, leases coordinationv1client.LeasesGetter) (*Elector, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	fence := newFence(cfg.RenewDeadline, cfg.Clock, cfg.Refused)
	e := &Elector{cfg: cfg, fence: fence, lock: newLock(cfg, leases, fence), elected: make(chan struct{})}
	elector, err := leaderelection.NewLeaderElector(e.electorConfig())
	if err != nil {
		return nil, fmt.Errorf("configuring leader election: %w", err)
	}
	e.elector = elector
	return e, nil
}

// Fence is the write fence that the clients writing on behalf of this
// Elector's Work must go through (Fence.Wrap).
func (e *Elector) Fence() *Fence { return e.fence }

// lease names the Lease in logs.
func (e *Elector) lease() string { return e.cfg.Namespace + "/" + e.cfg.Name }

func (e *Elector) electorConfig() leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		LeaseDuration: e.cfg.LeaseDuration,
		RenewDeadline: e.cfg.RenewDeadline,
		RetryPeriod:   e.cfg.RetryPeriod,
		// Run releases the Lease itself (release), only after a graceful
		// stop: after a loss there is nothing to release, and trying would
		// hang on a partitioned server.
		ReleaseOnCancel: false,
		Name:            e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.logger.Info("Became the leader; starting workers", "lease", e.lease(), "identity", e.cfg.Identity)
				close(e.elected)
			},
			OnStoppedLeading: func() {
				e.logger.Info("Stopped leading", "lease", e.lease(), "identity", e.cfg.Identity)
			},
			OnNewLeader: func(identity string) {
				// After a loss the process is on its way out, not standing by.
				// "" is a released Lease: nobody leads.
				if identity != "" && identity != e.cfg.Identity && e.fence.Cause() == nil {
					e.logger.Info("Another replica leads; standing by", "leader", identity)
				}
			},
		},
	}
}

// Run stands by until this process holds the Lease, runs work while it
// does, and returns when ctx has ended and the Lease is released, or when
// leadership is lost (an error wrapping ErrLost). When it returns, the
// fence refuses every write and has closed the connections it was given.
//
// The order of stopping matters. On a shutdown (ctx ends) the work drains
// while the elector keeps renewing; then the fence closes, the writes in
// flight are answered, and only then is the Lease released, so a successor
// cannot start writing while we do. If renewal fails during the drain, the
// fence cuts the drain short. On losing leadership the fence has already
// stopped every write; the work is aborted and nothing is released (the
// Lease is someone else's, or out of reach).
func (e *Elector) Run(ctx context.Context, work Work) error {
	defer e.fence.closeConnections()
	el := e.startElector(ctx)
	defer el.stop()
	select {
	case <-ctx.Done():
		return e.stepDown(ctx, el, work, nil)
	case <-e.fence.lost:
		return e.lost(ctx, el, work, nil)
	case <-e.elected:
	}
	return e.lead(ctx, el, work)
}

// running is client-go's elector at work on a context of its own.
type running struct {
	// done is closed when the elector's Run has returned.
	done <-chan struct{}
	// cancel ends the elector's context.
	cancel context.CancelFunc
}

// stop ends the elector and waits until it has returned.
func (r running) stop() {
	r.cancel()
	<-r.done
}

// startElector runs the elector on a context that outlives ctx, so that
// the Lease keeps being renewed during a drain; Run stops it on every way
// out.
func (e *Elector) startElector(ctx context.Context) running {
	e.logger = klog.FromContext(ctx)
	electorCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.elector.Run(electorCtx)
	}()
	return running{done: done, cancel: cancel}
}

// lead runs work until it returns (ctx ended and the drain finished, or it
// failed) or leadership is lost.
func (e *Elector) lead(ctx context.Context, el running, work Work) error {
	// runDone receives work.Run's result from the goroutine below.
	runDone := make(chan error, 1)
	go func() { runDone <- work.Run(ctx) }()
	select {
	case err := <-runDone:
		return e.stepDown(ctx, el, work, err)
	case <-e.fence.lost:
		return e.lost(ctx, el, work, runDone)
	case <-el.done:
		// The elector gave up renewing before the fence's deadline passed:
		// it can't (it retries up to the renew deadline after the retry
		// period), but if it ever does, leadership is just as lost.
		e.fence.lose(errors.New("the leader elector stopped renewing the Lease"))
		return e.lost(ctx, el, work, runDone)
	}
}

// stepDown ends a graceful stop: no more writes, the writes in flight
// answered, the elector stopped, then the Lease released if we held it. It
// returns runErr, or the loss if leadership was lost meanwhile.
func (e *Elector) stepDown(ctx context.Context, el running, work Work, runErr error) error {
	logger := klog.FromContext(ctx)
	// Admitted writes end at the fence's deadline at the latest.
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	if !e.fence.stepDown(waitCtx) {
		return e.lost(ctx, el, work, nil)
	}
	el.stop()
	if e.lock.acquired.Load() {
		if err := release(context.WithoutCancel(ctx), e.lock.Interface, e.cfg.RenewDeadline); err != nil {
			// The Lease then expires by itself, a lease duration after our
			// last renewal; we wrote nothing since.
			logger.Error(err, "Releasing the Lease failed; it will expire by itself", "lease", e.lease())
		} else {
			logger.Info("Released the Lease", "lease", e.lease())
		}
	}
	return runErr
}

// lost ends a loss of leadership: the fence has already refused every write
// since the moment of the loss; the work is aborted (and, if it was
// started, its end awaited on runDone) and the elector stopped.
func (e *Elector) lost(ctx context.Context, el running, work Work, runDone <-chan error) error {
	err := fmt.Errorf("%w (%v): %s", ErrLost, e.fence.Cause(), e.cfg.AfterLoss)
	klog.FromContext(ctx).Info("Lost leadership: writes stopped, stopping workers", "lease", e.lease(),
		"identity", e.cfg.Identity, "cause", e.fence.Cause())
	work.Abort(err)
	if runDone != nil {
		<-runDone
	}
	el.stop()
	return err
}

// release gives up the Lease as client-go's elector does (no holder, a
// one-second duration, so standbys take it at once), if we still hold it.
// The caller has stopped the elector: the lock is not safe for concurrent
// use.
func release(ctx context.Context, lock resourcelock.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rec, _, err := lock.Get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case rec.HolderIdentity != lock.Identity():
			return nil
		}
		now := metav1.NewTime(time.Now())
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions:    rec.LeaderTransitions,
			LeaseDurationSeconds: 1,
			RenewTime:            now,
			AcquireTime:          now,
		})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}
