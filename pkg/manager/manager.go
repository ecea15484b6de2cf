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

// Package manager wires the Book controller into a running process: API
// clients, informers, events, the controller, leader election (pkg/leader)
// or sharding, the endpoints, and Run as a list of named steps. It
// is the hand-written counterpart of controller-runtime's Manager, and is
// what both cmd/controller and the integration tests start.
package manager

import (
	"context"
	"errors"
	"fmt" // fork:line shards
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/leader"
	"ydzs.io/book-controller/pkg/metrics"
	"ydzs.io/book-controller/pkg/migration" // fork:line v2
	"ydzs.io/book-controller/pkg/preflight"
	"ydzs.io/book-controller/pkg/shard"   // fork:line shards
	"ydzs.io/book-controller/pkg/ui"      // fork:line ui
	"ydzs.io/book-controller/pkg/webhook" // fork:line v2
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
	// fork:begin shards
	// Shards, above 1, splits the Books by a hash of their UID into that
	// many shards, each served by the replica holding its Lease (needs
	// leader election; see pkg/shard). 0 and 1 run unsharded.
	Shards int
	// fork:end shards
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
	// fork:begin ui
	// UIAddr serves the live view of the controller (pkg/ui); "" or "0"
	// (the default) is off. With MetricsSecure it is served as the metrics.
	UIAddr string
	// UISourceURL is the base of the UI's links to this repository's
	// files (a fork's, say); empty: the module path's home.
	UISourceURL string
	// fork:end ui
	// fork:begin v2
	// Webhook serves the Book CRD's conversion webhook, when the CRD
	// converts through one (webhook.go).
	Webhook Webhook
	// fork:end v2
	// EventQPS and EventBurst limit the Events this process sends; Events
	// over the rate are dropped (see newEventRecorder). Zero
	// means no limit.
	EventQPS   float32
	EventBurst int
	// fork:begin v2
	// StorageMigration, while this process leads, keeps the Book CRD's
	// status.storedVersions down to its storage version, by
	// StorageVersionMigrations (pkg/migration). Not with Shards.
	StorageMigration bool
	// fork:end v2
}

// ErrLeaderElectionLost is wrapped by Run's error when this process stopped
// holding the Lease without being asked to: it must exit, so that it
// restarts as a standby with fresh caches.
var ErrLeaderElectionLost = leader.ErrLost

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
	// last successful renewal (see pkg/leader's Fence).
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
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
	m.setUpUI() // fork:line ui
	// fork:begin shards
	if err := m.planShards(); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	// fork:end shards
	steps := []step{
		{"connect", m.connect},                      // clients; writers behind the fence
		{"serve the webhook", m.serveWebhook},       // before anything lists Books through it // fork:line v2
		{"preflight", m.preflight},                  // API reachable, CRD installed, Lease holdable
		{"build the controller", m.buildController}, // Events, informers' handlers, queue
		{"serve endpoints", m.serveEndpoints},       // /metrics, /healthz, /readyz
		{"serve the UI", m.serveUI},                 // --ui-bind-address // fork:line ui
		{"start informers", m.startInformers},       // warm caches, also on a standby
		{"work", m.work},                            // the controller: at once, or only while leading
	}
	// fork:begin shards
	if m.sharded() {
		steps = m.shardedSteps()
	}
	// fork:end shards
	// fork:begin v2
	if m.cfg.Webhook.Only {
		steps = m.webhookOnlySteps()
	}
	// fork:end v2
	for _, step := range steps {
		klog.FromContext(ctx).V(4).Info("Manager step", "step", step.name)
		if err := step.run(ctx); err != nil {
			if errors.Is(err, errStopped) {
				return nil // asked to stop while starting: a clean stop, not a failure
			}
			return err
		}
	}
	return nil
}

// step is one of Run's steps, named for its logs.
type step struct {
	name string
	run  func(context.Context) error
}

// errStopped is returned by a step that ended because ctx did.
var errStopped = errors.New("stopped while starting")

// manager is one Run: what each step built, and how to undo it. Its fields
// are written by Run's goroutine, step by step, before the step that
// serves the endpoints; the probes and the metrics scrape only read them
// after.
type manager struct {
	cfg   Config
	clock clock.WithDelayedExecution

	clients *clients
	metrics *managerMetrics
	// fork:begin ui
	// ui records what the controllers do, for --ui-bind-address; nil when off.
	ui *ui.Recorder
	// fork:end ui
	// eventLimiter is the process's Event token bucket, shared by every
	// shard's recorder; nil for no limit.
	eventLimiter flowcontrol.RateLimiter
	// Without shards: the controller with its informers, and the elector
	// that runs it while the process holds the Lease (nil without leader
	// election).
	stack   *stack
	elector *leader.Elector
	// fork:begin v2
	// migrator runs beside the stack with --storage-migration; else nil.
	migrator *migration.Migrator
	// webhookServer serves the conversion webhook; nil when it is off.
	webhookServer *webhook.Server
	// lateWebhook is the webhook that starts when the CRD switches to it
	// (webhookswitch.go); nil when it started at once or is off.
	lateWebhook *lateWebhook
	// fork:end v2
	// fork:begin shards
	// With shards: their buckets, and a slot per shard, each with an
	// elector, a fence and (while it holds its Lease) a stack of its own.
	shards  []shard.Shard
	replica *shard.Replica
	// fork:end shards
	// readyChecks are more conditions of /readyz, each nil when ready.
	readyChecks []func() error
	// stops undo the steps, last first; each returns once what it stops
	// has stopped.
	stops []func()
}

// fork:begin shards
// shardedSteps are Run's steps with --shards: each shard's informers and
// controller are built when its Lease is acquired, by its slot, so that a
// spare caches nothing.
func (m *manager) shardedSteps() []step {
	return []step{
		{"connect", m.connect},                // clients; a slot per shard, with its gate
		{"serve the webhook", m.serveWebhook}, // on every replica, spares too // fork:line v2
		{"preflight", m.preflight},            // and the API server filters by shard
		{"serve endpoints", m.serveEndpoints}, // /metrics, /healthz, /readyz
		{"serve the UI", m.serveUI},           // --ui-bind-address // fork:line ui
		{"work", m.workShards},                // each shard while holding its Lease
	}
}

// fork:end shards

func (m *manager) onStop(f func()) { m.stops = append(m.stops, f) }

func (m *manager) stop() {
	for i := len(m.stops) - 1; i >= 0; i-- {
		m.stops[i]()
	}
}

// connect builds the clients, and the metrics the fence counts in. With
// leader election, the clients that write go through the write fence, which
// cuts their connections on a loss. With shards, it prepares a slot per
// shard; each builds its writing clients when it acquires its Lease.
func (m *manager) connect(context.Context) error {
	m.metrics = newManagerMetrics()
	m.eventLimiter = eventLimiter(m.cfg.EventQPS, m.cfg.EventBurst)
	le := m.cfg.LeaderElection
	c, err := newClients(m.cfg.RESTConfig, userAgent(m.cfg.RESTConfig.UserAgent, le.Identity), m.cfg.Controller.Off)
	if err != nil {
		return err
	}
	m.clients = c
	m.onStop(c.close)
	// fork:begin shards
	if m.sharded() {
		m.replica = shard.NewReplica(shard.Config{Shards: m.shards, Lease: m.leaseConfig(le.ID, ""),
			Leases: c.leases, Build: m.buildShard})
		return nil
	}
	// fork:end shards
	if le.Enabled {
		if m.elector, err = leader.New(m.leaseConfig(le.ID, exitAfterLoss), c.leases); err != nil {
			return err
		}
	}
	return nil
}

// exitAfterLoss is what a process without shards does after a loss.
const exitAfterLoss = "another replica may be syncing Books now; exiting so that this one restarts as a standby"

// leaseConfig is the leader election on the Lease name (with shards: the
// base of the shards' Lease names), whose loss's error ends with afterLoss.
func (m *manager) leaseConfig(name, afterLoss string) leader.Config {
	le := m.cfg.LeaderElection
	return leader.Config{
		Namespace: le.Namespace, Name: name, Identity: le.Identity,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		AfterLoss: afterLoss, Refused: m.metrics.fenced, Clock: m.clock,
	}
}

// preflight checks that the API server serves the Book API, that the
// Lease can be held and that the server filters by shard, as needed
// (pkg/preflight).
func (m *manager) preflight(ctx context.Context) error {
	err := preflight.BookAPI(ctx, m.cfg.RESTConfig.Host, m.clients.kubeReads.Discovery().RESTClient())
	if err == nil && m.cfg.LeaderElection.Enabled {
		le := m.cfg.LeaderElection
		name := le.ID
		// fork:begin shards
		if m.sharded() {
			name = shard.LeaseName(le.ID, 0)
		}
		// fork:end shards
		err = preflight.Lease(ctx, m.clients.leases, le.Namespace, name)
	}
	// fork:begin shards
	if err == nil && m.sharded() {
		err = preflight.Shards(ctx, m.cfg.RESTConfig.Host, m.cfg.Namespace, m.clients.bookReads, m.clients.kubeReads, m.shards[0])
	}
	// fork:end shards
	if err != nil && ctx.Err() != nil {
		return errStopped
	}
	return err
}

// buildController builds the writing clients (behind the fence, with
// leader election), and on them the controller, its informers and its
// Event recorder (registering its handlers; nothing runs yet).
func (m *manager) buildController(ctx context.Context) error {
	var fence *leader.Fence
	if m.elector != nil {
		fence = m.elector.Fence()
	}
	w, err := newWriters(m.clients.base, fence)
	if err != nil {
		return err
	}
	m.onStop(w.conns.CloseAll)
	if m.stack, err = m.buildStack(ctx, w, nil); err != nil {
		return err
	}
	m.onStop(m.stack.Stop)
	// fork:begin v2
	if m.migrator, err = m.buildMigrator(ctx, w); err != nil {
		return err
	}
	// fork:end v2
	return nil
}

// serveEndpoints binds and serves /metrics and the probes. A port already
// in use fails the start with the flag's name.
func (m *manager) serveEndpoints(ctx context.Context) error {
	synced, healthy := m.probes()
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
	probeServer, err := listen("--health-probe-bind-address", m.cfg.ProbeAddr, probeHandler(synced, healthy, m.ready))
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

// ready is nil when every one of readyChecks is.
func (m *manager) ready() error {
	for _, check := range m.readyChecks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// probes are what /readyz and /healthz report, and registers the metrics
// that read the same state.
func (m *manager) probes() (synced func() bool, healthy func() error) {
	// fork:begin shards
	if m.sharded() {
		m.metrics.watchShards(m.replica)
		return m.replica.Synced, m.replica.Healthy
	}
	// fork:end shards
	// fork:begin v2
	if m.stack == nil { // --webhook-only: nothing to cache, nor to lead
		return func() bool { return true }, func() error { return nil }
	}
	// fork:end v2
	leading := func() bool { return true }
	healthy = func() error { return nil }
	if m.elector != nil {
		leading, healthy = m.elector.Fence().Leading, m.elector.Fence().Healthy
	}
	m.metrics.watch(m.cfg.LeaderElection.ID, leading, m.stack.CachedBooks, m.stack.CachedConfigMaps)
	return m.stack.HasSynced, healthy
}

// startInformers starts the informers before leadership is decided, so that
// a standby has warm caches the moment it takes over. They stop (and
// Shutdown waits for them) when Run returns, whatever ctx does: after a lost
// Lease, ctx has not ended.
func (m *manager) startInformers(context.Context) error {
	m.stack.Start()
	return nil
}

// work runs the controller: at once without leader election, or only while
// this process holds the Lease.
func (m *manager) work(ctx context.Context) error {
	le := m.cfg.LeaderElection
	klog.FromContext(ctx).Info("Starting Book controller", "namespace", namespaceOrAll(m.cfg.Namespace),
		"workers", m.cfg.Workers, "leaderElection", le.Enabled, "identity", le.Identity,
		"layersOff", m.cfg.Controller.Off.Names())
	var work leader.Work = m.stack
	// fork:begin v2
	if m.migrator != nil {
		work = &migrating{Work: m.stack, migrator: m.migrator}
	}
	// fork:end v2
	if m.elector == nil {
		return work.Run(ctx)
	}
	return m.elector.Run(ctx, work)
}

func namespaceOrAll(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}
