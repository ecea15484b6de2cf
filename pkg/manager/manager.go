// Package manager wires the Book controller into a running process: API
// clients, informers, events, leader election and the controller's Run. It
// is the hand-written counterpart of controller-runtime's Manager, and is
// what both cmd/controller and the integration tests start.
package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"ydzs.io/book-controller/pkg/controller"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions"
	"ydzs.io/book-controller/pkg/metrics"
	"ydzs.io/book-controller/pkg/ui"
)

// Config is everything Run needs. Defaults() holds the settings of the
// book-controller command; in a Config built by hand, zero Workers and zero
// leader-election fields pick those defaults too (other zero values mean
// "off", as documented on each field).
type Config struct {
	// RESTConfig reaches the API server; QPS and Burst are taken as given.
	// Its UserAgent (default "book-controller") is sent followed by the
	// replica's identity.
	RESTConfig *rest.Config
	// Namespace limits the controller to one namespace; empty means all.
	Namespace string
	// Shards, above 1, splits the Books by namespace hash into that many
	// shards, each served by the replica holding its Lease (needs leader
	// election and every namespace; see sharded.go). 0 and 1 run unsharded.
	Shards int
	// ShardBoundaries, if set, are the Shards-1 points where one shard's
	// hash range ends and the next begins (see ShardsAt); unset, the
	// ranges are equal. Every replica must be given the same.
	ShardBoundaries []string
	// Workers is the number of goroutines that sync Books concurrently
	// (with shards: in each shard held).
	Workers int
	// ResyncPeriod replays the informer caches to the handlers; 0 disables it.
	ResyncPeriod time.Duration
	// Controller tunes the controller itself.
	Controller controller.Options
	// LeaderElection, when enabled, runs the workers only in the replica
	// that holds the Lease; the others keep warm caches and stand by.
	LeaderElection LeaderElection
	// MetricsAddr serves Prometheus metrics on /metrics; "" or "0" is off.
	MetricsAddr string
	// MetricsSecure serves them over HTTPS to authorized callers only, with
	// the certificate in MetricsCertDir or a self-signed one (metricsauth.go).
	MetricsSecure  bool
	MetricsCertDir string
	// ProbeAddr serves /healthz and /readyz; "" or "0" is off.
	ProbeAddr string
	// PprofAddr serves the Go runtime's profiles under /debug/pprof/; ""
	// or "0" (the default) is off.
	PprofAddr string
	// UIAddr serves the live view of the controller (pkg/ui); "" or "0"
	// (the default) is off. With MetricsSecure it is served as the metrics.
	UIAddr string
	// EventQPS and EventBurst limit the Events this process sends; Events
	// over the rate are dropped (see NewEventRecorder). Zero
	// means no limit.
	EventQPS   float32
	EventBurst int
}

// Run checks that the API server is usable, starts the informers and the
// controller (only while holding the Lease, with leader election), and
// blocks until ctx ends and the controller has drained, or until leadership
// is lost (an error wrapping ErrLeaderElectionLost). Every goroutine and
// connection it started is gone when it returns.
func Run(ctx context.Context, cfg Config) error {
	if cfg.RESTConfig == nil {
		return errors.New("manager: RESTConfig is required")
	}
	m := &manager{cfg: withDefaults(cfg), clock: clock.RealClock{}}
	defer m.stop()
	m.setUpUI()
	if m.sharded() {
		switch {
		case !m.cfg.LeaderElection.Enabled:
			return fmt.Errorf("manager: %d shards need leader election: each shard is served by the holder of its Lease", m.cfg.Shards)
		case m.cfg.Namespace != "":
			return fmt.Errorf("manager: %d shards need every namespace watched, not only %q: a namespace is never split over shards", m.cfg.Shards, m.cfg.Namespace)
		}
		shards, err := m.shardRanges()
		if err != nil {
			return fmt.Errorf("manager: %w", err)
		}
		m.shards = shards
	} else if len(m.cfg.ShardBoundaries) > 0 {
		return errors.New("manager: shard boundaries are given but Shards is not above 1")
	}

	type step struct {
		name string
		run  func(context.Context) error
	}
	steps := []step{
		{"connect", m.connect},                      // clients; writers behind the fence
		{"preflight", m.preflight},                  // API reachable, CRD installed, Lease holdable
		{"build the controller", m.buildController}, // Events, informers' handlers, queue
		{"serve endpoints", m.serveEndpoints},       // /metrics, /healthz, /readyz
		{"serve the UI", m.serveUI},                 // --ui-bind-address
		{"start informers", m.startInformers},       // warm caches, also on a standby
	}
	work := m.work // the controller: at once, or only while leading
	if m.sharded() {
		// Each shard's informers and controller are built when its Lease
		// is acquired, by its slot: a spare caches nothing.
		steps = []step{
			{"connect", m.connect},                // clients; a slot per shard, with its gate
			{"preflight", m.preflight},            // and the API server filters by shard
			{"serve endpoints", m.serveEndpoints}, // /metrics, /healthz, /readyz
			{"serve the UI", m.serveUI},           // --ui-bind-address
		}
		work = m.workShards
	}
	for _, step := range steps {
		klog.FromContext(ctx).V(4).Info("Manager step", "step", step.name)
		if err := step.run(ctx); err != nil {
			if errors.Is(err, errStopped) {
				return nil // asked to stop while starting: a clean stop, not a failure
			}
			return err
		}
	}
	return work(ctx)
}

// errStopped is returned by a step that ended because ctx did.
var errStopped = errors.New("stopped while starting")

// manager is one Run: what each step built, and how to undo it.
type manager struct {
	cfg   Config
	clock clock.WithDelayedExecution

	clients     *clients
	fence       *writeFence // nil without leader election
	lock        *fencingLock
	metrics     *managerMetrics
	kubeFactory kubeinformers.SharedInformerFactory
	bookFactory bookinformers.SharedInformerFactory
	controller  *controller.Controller
	// ui records what the controllers do, for --ui-bind-address; nil when off.
	ui *ui.Recorder
	// With shards: a slot per shard, the Event token bucket they share,
	// and the configuration their fenced writers start from.
	shards       []Shard
	slots        []*shardSlot
	eventLimiter flowcontrol.RateLimiter
	writeBase    *rest.Config
	// stops undo the steps, last first; each returns once what it stops
	// has stopped.
	stops []func()
}

func (m *manager) onStop(f func()) { m.stops = append(m.stops, f) }

// sharded reports whether the Books are split over shards.
func (m *manager) sharded() bool { return m.cfg.Shards > 1 }

func (m *manager) stop() {
	for i := len(m.stops) - 1; i >= 0; i-- {
		m.stops[i]()
	}
}

// connect builds the clients, and the metrics the fence counts in. With
// leader election, the clients that write go through the write fence, which
// cuts their connections on a loss, and the Lease lock reports to it.
func (m *manager) connect(context.Context) error {
	m.metrics = newManagerMetrics()
	le := m.cfg.LeaderElection
	var fence func(*rest.Config) *rest.Config
	if m.sharded() {
		// Each shard held writes through clients and a fence of its own;
		// the process-wide writing clients go unused.
		m.planShards()
	} else if le.Enabled {
		m.fence = newWriteFence(le.RenewDeadline, m.clock, m.metrics.fenced, nil)
		fence = m.fence.wrap
	}
	c, err := newClients(m.cfg.RESTConfig, userAgent(m.cfg.RESTConfig.UserAgent, le.Identity), fence)
	if err != nil {
		return err
	}
	m.clients = c
	m.onStop(c.close)
	if m.fence != nil {
		m.fence.conns = c.writers
		lock := &resourcelock.LeaseLock{
			Client:     c.leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		}
		lock.LeaseMeta.Namespace, lock.LeaseMeta.Name = le.Namespace, le.ID
		m.lock = &fencingLock{Interface: lock, fence: m.fence, clock: m.clock}
	}
	return nil
}

// preflight turns the usual ways of being misconfigured into one sentence
// each, before anything starts: client-go would otherwise retry them for
// ever, logging each attempt.
func (m *manager) preflight(ctx context.Context) error {
	err := Preflight(ctx, m.cfg.RESTConfig.Host, m.clients.kubeReads.Discovery().RESTClient())
	if err == nil && m.cfg.LeaderElection.Enabled {
		le := m.cfg.LeaderElection
		name := le.ID
		if m.sharded() {
			name = ShardLeaseName(le.ID, 0)
		}
		err = PreflightLease(ctx, m.clients.leases, le.Namespace, name)
	}
	if err == nil && m.sharded() {
		err = PreflightShards(ctx, m.cfg.RESTConfig.Host, m.clients.bookReads, m.clients.kubeReads, m.shards[0])
	}
	if err != nil && ctx.Err() != nil {
		return errStopped
	}
	return err
}

// buildController starts the Event recorder and builds the controller on
// the informer factories (registering its handlers; nothing runs yet).
func (m *manager) buildController(ctx context.Context) error {
	// Events outlive ctx by the drain: the last syncs may still report.
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	m.onStop(stopEvents)
	recorder, err := NewEventRecorder(eventCtx, m.clients.kube, m.cfg.EventQPS, m.cfg.EventBurst)
	if err != nil {
		return err
	}
	m.kubeFactory, m.bookFactory = NewInformerFactories(m.clients.kubeReads, m.clients.bookReads, m.cfg.Namespace, m.cfg.ResyncPeriod, "")
	c, err := controller.New(m.clients.kube, m.clients.books, m.bookFactory.Webapp().V1().Books(),
		m.kubeFactory.Core().V1().ConfigMaps(), recorder, m.cfg.Controller)
	if err != nil {
		return err
	}
	m.controller = c
	// Releases the work queue of a controller that never ran (an early
	// return, a standby that never led); after Run it changes nothing.
	m.onStop(func() { c.Abort(errors.New("manager stopped")) })
	return nil
}

// serveEndpoints binds and serves /metrics and the probes. A port already
// in use fails the start with the flag's name.
func (m *manager) serveEndpoints(ctx context.Context) error {
	var synced func() bool
	var healthy func() error
	if m.sharded() {
		synced, healthy = m.shardsSynced, m.shardsHealthy
		m.metrics.watchShards(m.cfg.LeaderElection.ID, m.slots)
	} else {
		leading := func() bool { return true }
		healthy = func() error { return nil }
		if m.fence != nil {
			leading, healthy = m.fence.isLeading, m.fence.healthy
		}
		synced = m.controller.HasSynced
		m.metrics.watch(m.cfg.LeaderElection.ID, leading, m.bookFactory.Webapp().V1().Books().Lister())
	}
	// serveCtx lasts until Run returns: the metrics certificate is watched
	// while it lasts. Ended by the stop registered below.
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	m.onStop(stopServing)
	// The TokenReviews and SubjectAccessReviews of secure metrics are
	// POSTs: they go through an unfenced client, so that a standby's
	// metrics can be scraped too.
	metricsServer, err := listenMetrics(serveCtx, m.cfg, m.clients.kubeReads, metrics.Handler(m.metrics.registry))
	if err != nil {
		return err
	}
	probeServer, err := listen("--health-probe-bind-address", m.cfg.ProbeAddr, probeHandler(synced, healthy))
	if err != nil {
		metricsServer.stop()
		return err
	}
	pprofServer, err := listen("--pprof-bind-address", m.cfg.PprofAddr, pprofHandler())
	if err != nil {
		metricsServer.stop()
		probeServer.stop()
		return err
	}
	// The endpoints stay up until Run returns: through the drain, and with
	// /healthz failing, from a loss of leadership until the exit.
	for _, s := range []*httpServer{metricsServer, probeServer, pprofServer} {
		s.serve(ctx)
		m.onStop(s.stop)
	}
	return nil
}

// startInformers starts the informers before leadership is decided, so that
// a standby has warm caches the moment it takes over. They stop (and
// Shutdown waits for them) when Run returns, whatever ctx does: after a lost
// Lease, ctx has not ended.
func (m *manager) startInformers(ctx context.Context) error {
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	m.kubeFactory.Start(informerCtx.Done())
	m.bookFactory.Start(informerCtx.Done())
	m.onStop(func() {
		stopInformers()
		m.kubeFactory.Shutdown()
		m.bookFactory.Shutdown()
	})
	return nil
}

// work runs the controller: at once without leader election, or only while
// this process holds the Lease.
func (m *manager) work(ctx context.Context) error {
	le := m.cfg.LeaderElection
	klog.FromContext(ctx).Info("Starting Book controller", "namespace", namespaceOrAll(m.cfg.Namespace),
		"workers", m.cfg.Workers, "leaderElection", le.Enabled, "identity", le.Identity)
	if !le.Enabled {
		return m.controller.Run(ctx, m.cfg.Workers)
	}
	l := &leader{le: le, lock: m.lock, fence: m.fence, controller: m.controller, workers: m.cfg.Workers, afterLoss: exitAfterLoss}
	return l.run(ctx)
}

func namespaceOrAll(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}
