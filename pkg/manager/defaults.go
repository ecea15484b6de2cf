package manager

import (
	"time"

	"ydzs.io/book-controller/pkg/controller"
)

// The defaults of every setting, with the reason for each. The flags of
// cmd/controller start from Defaults(); Run fills the zero fields of a
// Config from the same constants (withDefaults). The controller's own tuning
// (ConflictRecheck, DrainTimeout, RateLimiter) defaults in pkg/controller,
// which Defaults() copies here so the flags show it.
const (
	// DefaultWorkers: a sync is two round trips to the API server, 0.1–0.3 s
	// under a burst, and almost no CPU. To keep up with Books arriving at
	// rate λ takes λ × that many syncs in flight (Little's law): about 100
	// for the 650 Books/s a 2-core API server accepts. With 32 the queue grew
	// and create→Ready p99 reached 1.5 s; with 128 it stays under 1 s
	// (docs/benchmark.md). Idle workers cost a parked goroutine.
	DefaultWorkers = 128

	// DefaultShards: one replica does all the work, as before sharding.
	DefaultShards = 1
	// MaxShards bounds --shards: each shard costs every replica a leader
	// elector polling its Lease, and the API server a watch per resource.
	MaxShards = 64

	// DefaultResyncPeriod replays the caches rarely: resyncs of unchanged
	// objects are skipped, and the 30 s conflict recheck covers the one
	// case an event cannot (a foreign ConfigMap outside our cache).
	DefaultResyncPeriod = 10 * time.Hour

	// DefaultKubeAPIQPS and DefaultKubeAPIBurst: client-go's own 5 QPS / 10
	// burst would cap a controller at a few Books per second. At 500 QPS the
	// limit still bound (docs/benchmark.md): each Book costs two requests
	// on the core client (ConfigMap, Event). 2000/4000 is above what an API
	// server takes from one client, so its priority-and-fairness paces us,
	// while a runaway loop is still capped.
	DefaultKubeAPIQPS   = 2000
	DefaultKubeAPIBurst = 4000

	// DefaultEventQPS and DefaultEventBurst: plenty for people reading
	// Events. In a burst of thousands of Books most are dropped whatever the
	// limit; a low one leaves the API server to the writes that make Books
	// Ready: the kubelet's 50/100 cost about 30 % on create→Ready p99
	// (docs/benchmark.md).
	DefaultEventQPS   = 10
	DefaultEventBurst = 25

	// DefaultMetricsAddr and DefaultProbeAddr are kubebuilder's scaffold:
	// metrics off unless asked for (the Deployment asks), probes on the
	// port its manifests use.
	DefaultMetricsAddr = disabledAddr
	DefaultProbeAddr   = ":8081"

	// DefaultPprofAddr is off, as controller-runtime's PprofBindAddress:
	// profiles are for an engineer looking into the process, not for
	// every deployment.
	DefaultPprofAddr = disabledAddr

	// Leader election: kube-controller-manager's timings and our name.
	DefaultLeaderElectionID = "book-controller"
	DefaultLeaseDuration    = 15 * time.Second
	DefaultRenewDeadline    = 10 * time.Second
	DefaultRetryPeriod      = 2 * time.Second

	// DefaultUserAgent starts the user agent when RESTConfig has none; Run
	// appends the replica's identity.
	DefaultUserAgent = "book-controller"
)

// Defaults returns the settings book-controller runs with when no flag says
// otherwise. RESTConfig, Namespace and the leader-election namespace and
// identity are left empty: they depend on where the process runs.
func Defaults() Config {
	return Config{
		Workers:      DefaultWorkers,
		Shards:       DefaultShards,
		ResyncPeriod: DefaultResyncPeriod,
		Controller: controller.Options{
			ConflictRecheck: controller.DefaultConflictRecheck,
			DrainTimeout:    controller.DefaultDrainTimeout,
		},
		LeaderElection: LeaderElection{
			ID:            DefaultLeaderElectionID,
			LeaseDuration: DefaultLeaseDuration,
			RenewDeadline: DefaultRenewDeadline,
			RetryPeriod:   DefaultRetryPeriod,
		},
		MetricsAddr: DefaultMetricsAddr,
		ProbeAddr:   DefaultProbeAddr,
		PprofAddr:   DefaultPprofAddr,
		UIAddr:      disabledAddr,
		EventQPS:    DefaultEventQPS,
		EventBurst:  DefaultEventBurst,
	}
}

// withDefaults fills the fields a programmatic caller left zero, where zero
// does not already mean something (a zero ResyncPeriod, EventQPS or address
// means off). The leader-election namespace and identity are found from the
// environment.
func withDefaults(cfg Config) Config {
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	le := &cfg.LeaderElection
	if le.ID == "" {
		le.ID = DefaultLeaderElectionID
	}
	if le.Namespace == "" {
		le.Namespace = podNamespace()
	}
	if le.Identity == "" {
		le.Identity = defaultIdentity()
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
	return cfg
}
