package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
)

// ErrLeaderElectionLost is returned by Run when this process stops being the
// leader without being asked to: it must exit so that it restarts as a
// follower with fresh caches.
var ErrLeaderElectionLost = errors.New("lost leader election: another replica may be reconciling now; exiting so this one restarts as a follower")

// LeaderElection configures leader election on a coordination.k8s.io Lease.
type LeaderElection struct {
	// Enabled turns leader election on; off, the process always works.
	Enabled bool
	// Namespace holds the Lease. Empty means the namespace the pod runs in,
	// or "default" outside a cluster.
	Namespace string
	// ID is the Lease's name.
	ID string
	// Identity names this replica in the Lease; empty means hostname_uuid.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; see
	// k8s.io/client-go/tools/leaderelection.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Leader election defaults, the same as kube-controller-manager's.
const (
	DefaultLeaderElectionID = "book-controller"
	DefaultLeaseDuration    = 15 * time.Second
	DefaultRenewDeadline    = 10 * time.Second
	DefaultRetryPeriod      = 2 * time.Second
)

// serviceAccountNamespaceFile is where a pod learns its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// runLeading runs the controller only while this process holds the Lease.
//
// The order of stopping matters. On a shutdown signal the controller drains
// while we still hold the Lease, and only then is the Lease released, so a
// successor can't start writing while we do. On losing the Lease, the
// controller's workers are cancelled at once (controller.ErrAbort) and Run
// returns ErrLeaderElectionLost.
func runLeading(ctx context.Context, le LeaderElection, kubeClient kubernetes.Interface,
	c *controller.Controller, workers int, leaderGauge prometheus.Gauge,
	healthz *leaderelection.HealthzAdaptor) error {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		Client:     kubeClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	lock.LeaseMeta.Namespace, lock.LeaseMeta.Name = le.Namespace, le.ID

	runDone := make(chan error, 1)
	started := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		// Safe because the elector's context ends only after the
		// controller has stopped writing, and the process exits next.
		ReleaseOnCancel: true,
		Name:            le.ID,
		WatchDog:        healthz,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadingCtx context.Context) {
				logger.Info("Became the leader; starting workers", "lease", le.Namespace+"/"+le.ID, "identity", le.Identity)
				leaderGauge.Set(1)
				close(started)
				runCtx, abort := context.WithCancelCause(ctx)
				defer abort(nil)
				stop := context.AfterFunc(leadingCtx, func() { abort(controller.ErrAbort) })
				defer stop()
				runDone <- c.Run(runCtx, workers)
			},
			OnStoppedLeading: func() {
				leaderGauge.Set(0)
				logger.Info("Stopped leading", "lease", le.Namespace+"/"+le.ID, "identity", le.Identity)
			},
			OnNewLeader: func(identity string) {
				if identity != le.Identity {
					logger.Info("Another replica leads; standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}

	// The elector outlives ctx: it must keep renewing while the
	// controller drains, and release only after.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electorCtx)
	}()

	select {
	case <-ctx.Done(): // asked to stop: the controller, if leading, drains
	case <-electorDone: // the Lease was lost: the controller, if leading, aborts
	case err := <-runDone: // the controller stopped by itself
		stopElector()
		<-electorDone
		return err
	}
	// A controller started after this point sees a finished context and
	// returns before its workers start, so it is enough to wait for one that
	// started before.
	var runErr error
	select {
	case <-started:
		runErr = <-runDone
	default:
	}
	stopElector()
	<-electorDone
	if ctx.Err() == nil {
		return ErrLeaderElectionLost
	}
	return runErr
}

// withLeaderElectionDefaults fills in what the user left empty.
func withLeaderElectionDefaults(le LeaderElection) LeaderElection {
	if le.ID == "" {
		le.ID = DefaultLeaderElectionID
	}
	if le.Namespace == "" {
		le.Namespace = podNamespace()
	}
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host + "_" + string(uuid.NewUUID())
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = DefaultLeaseDuration
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = DefaultRenewDeadline
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = DefaultRetryPeriod
	}
	return le
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
