package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
)

// ErrLeaderElectionLost is wrapped by Run's error when this process stopped
// holding the Lease without being asked to: it must exit, so that it
// restarts as a standby with fresh caches.
var ErrLeaderElectionLost = errors.New("lost leader election")

// LeaderElection configures leader election on a coordination.k8s.io Lease.
type LeaderElection struct {
	// Enabled turns leader election on; off, the process always works.
	Enabled bool
	// Namespace holds the Lease. Empty means the namespace the pod runs in,
	// or "default" outside a cluster.
	Namespace string
	// ID is the Lease's name.
	ID string
	// Identity names this replica in the Lease and in its user agent;
	// empty means hostname_uuid.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; see
	// k8s.io/client-go/tools/leaderelection. This process also stops
	// writing, and exits, once RenewDeadline has passed since it sent its
	// last successful renewal (see writeFence).
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// serviceAccountNamespaceFile is where a pod learns its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// worker is what a leader runs while it holds its Lease: the controller
// itself, or one shard's informers and controller (shardWork).
type worker interface {
	// Run works until ctx ends and the work has drained, or until Abort.
	Run(ctx context.Context, workers int) error
	// Abort stops the work at once; see controller.Controller.Abort.
	Abort(cause error)
}

var _ worker = (*controller.Controller)(nil)

// leader runs the controller only while this process holds the Lease.
type leader struct {
	le         LeaderElection
	lock       *fencingLock
	fence      *writeFence
	controller worker
	workers    int
	// afterLoss ends the error of a loss: what the process does next.
	afterLoss string
}

// exitAfterLoss is what a process without shards does after a loss.
const exitAfterLoss = "another replica may be syncing Books now; exiting so that this one restarts as a standby"

// run stands by until this process holds the Lease, runs the controller
// while it does, and returns when ctx has ended and the Lease is released,
// or when leadership is lost (an error wrapping ErrLeaderElectionLost).
//
// The order of stopping matters. On a shutdown (ctx ends) the controller
// drains while the elector keeps renewing; then the fence closes, the
// writes in flight are answered, and only then is the Lease released, so a
// successor cannot start writing while we do. If renewal fails during the
// drain, the fence cuts the drain short. On losing leadership the fence has
// already stopped every write; the controller is aborted and nothing is
// released (the Lease is someone else's, or out of reach).
func (l *leader) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	lease := l.le.Namespace + "/" + l.le.ID

	// elected is closed by the elector's OnStartedLeading: it holds the Lease.
	elected := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          l.lock,
		LeaseDuration: l.le.LeaseDuration,
		RenewDeadline: l.le.RenewDeadline,
		RetryPeriod:   l.le.RetryPeriod,
		// We release the Lease ourselves (release), only after a graceful
		// stop: after a loss there is nothing to release, and trying would
		// hang on a partitioned server.
		ReleaseOnCancel: false,
		Name:            l.le.ID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				logger.Info("Became the leader; starting workers", "lease", lease, "identity", l.le.Identity)
				close(elected)
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "lease", lease, "identity", l.le.Identity)
			},
			OnNewLeader: func(identity string) {
				// After a loss the process is on its way out, not standing by.
				// "" is a released Lease: nobody leads.
				if identity != "" && identity != l.le.Identity && l.fence.Cause() == nil {
					logger.Info("Another replica leads; standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	// electorCtx is the elector's life; it outlives ctx so that the Lease
	// keeps being renewed during a drain. stopElector (called by run, on
	// every way out) ends it.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	// electorDone is closed by the goroutine below when elector.Run returns.
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electorCtx)
	}()
	stopElecting := func() {
		stopElector()
		<-electorDone
	}

	// Stand by until this process leads, is asked to stop, or loses a
	// Lease it had just acquired.
	select {
	case <-ctx.Done():
		return l.stepDown(ctx, stopElecting, nil)
	case <-l.fence.Lost():
		return l.lost(ctx, stopElecting, nil)
	case <-elected:
	}

	// Lead: run the controller until it returns (ctx ended and the drain
	// finished, or it failed) or leadership is lost.
	// runDone receives controller.Run's result from the goroutine below.
	runDone := make(chan error, 1)
	go func() { runDone <- l.controller.Run(ctx, l.workers) }()
	select {
	case err := <-runDone:
		return l.stepDown(ctx, stopElecting, err)
	case <-l.fence.Lost():
		return l.lost(ctx, stopElecting, runDone)
	case <-electorDone:
		// The elector gave up renewing before the fence's deadline passed:
		// it can't (it retries up to the renew deadline after the retry
		// period), but if it ever does, leadership is just as lost.
		l.fence.lose(errors.New("the leader elector stopped renewing the Lease"))
		return l.lost(ctx, stopElecting, runDone)
	}
}

// stepDown ends a graceful stop: no more writes, the writes in flight
// answered, the elector stopped, then the Lease released if we held it. It
// returns runErr, or the loss if leadership was lost meanwhile.
func (l *leader) stepDown(ctx context.Context, stopElecting func(), runErr error) error {
	logger := klog.FromContext(ctx)
	// Admitted writes end at the fence's deadline at the latest.
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.le.RenewDeadline)
	defer cancel()
	if !l.fence.stepDown(waitCtx) {
		return l.lost(ctx, stopElecting, nil)
	}
	stopElecting()
	if l.lock.acquired.Load() {
		if err := release(context.WithoutCancel(ctx), l.lock.Interface, l.le.RenewDeadline); err != nil {
			// The Lease then expires by itself, a lease duration after our
			// last renewal; we wrote nothing since.
			logger.Error(err, "Releasing the Lease failed; it will expire by itself", "lease", l.le.Namespace+"/"+l.le.ID)
		} else {
			logger.Info("Released the Lease", "lease", l.le.Namespace+"/"+l.le.ID)
		}
	}
	return runErr
}

// lost ends a loss of leadership: the fence has already refused every write
// since the moment of the loss; the controller is aborted and the elector
// stopped. runDone, if the controller was started, delivers its end.
func (l *leader) lost(ctx context.Context, stopElecting func(), runDone <-chan error) error {
	err := fmt.Errorf("%w (%v): %s", ErrLeaderElectionLost, l.fence.Cause(), l.afterLoss)
	klog.FromContext(ctx).Info("Lost leadership: writes stopped, stopping workers", "lease", l.le.Namespace+"/"+l.le.ID,
		"identity", l.le.Identity, "cause", l.fence.Cause())
	l.controller.Abort(err)
	if runDone != nil {
		<-runDone
	}
	stopElecting()
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

// defaultIdentity is hostname_uuid: the hostname is the pod's name in a
// cluster, and the UUID tells restarts of one pod apart.
func defaultIdentity() string {
	host, _ := os.Hostname()
	return host + "_" + string(uuid.NewUUID())
}

// podNamespace is the namespace this pod runs in, or "default" outside a
// cluster.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}
