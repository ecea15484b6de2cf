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

package manager

import (
	"time"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/leader"
)

// The defaults of every setting, with the reason for each. The flags of
// cmd/controller start from Defaults(); Run fills the zero fields of a
// Config from the same constants (withDefaults). The controller's own tuning
// defaults in pkg/controller: Defaults() copies ConflictRecheck and
// DrainTimeout into Config.Controller, so that a Config built from
// Defaults() says what will be used, and leaves RateLimiter nil for
// controller.New to fill in.
const (
	// defaultWorkers: a sync is two round trips to the API server, 0.1–0.3 s
	// under a burst, and almost no CPU. To keep up with Books arriving at
	// rate λ takes λ × that many syncs in flight (Little's law): about 100
	// for the 650 Books/s a 2-core API server accepts. With 32 the queue grew
	// and create→Ready p99 reached 1.5 s; with 128 it stays under 1 s
	// (the benchmark). Idle workers cost a parked goroutine.
	// Measured: docs/benchmark.md. // fork:line bench
	defaultWorkers = 128

	// fork:begin shards
	// defaultShards: one replica does all the work, as before sharding.
	// shard.Max bounds --shards.
	defaultShards = 1
	// fork:end shards

	// defaultResyncPeriod replays the caches rarely: resyncs of unchanged
	// objects are skipped, and the 30 s conflict recheck covers the one
	// case an event cannot (a foreign ConfigMap outside our cache).
	defaultResyncPeriod = 10 * time.Hour

	// DefaultKubeAPIQPS and DefaultKubeAPIBurst: client-go's own 5 QPS / 10
	// burst would cap a controller at a few Books per second. At 500 QPS the
	// limit still bound (the benchmark): each Book costs two requests
	// on the core client (ConfigMap, Event). 2000/4000 is above what an API
	// server takes from one client, so its priority-and-fairness paces us,
	// while a runaway loop is still capped.
	// Measured: docs/benchmark.md. // fork:line bench
	DefaultKubeAPIQPS   = 2000
	DefaultKubeAPIBurst = 4000

	// defaultEventQPS and defaultEventBurst: plenty for people reading
	// Events. In a burst of thousands of Books most are dropped whatever the
	// limit; a low one leaves the API server to the writes that make Books
	// Ready: the kubelet's 50/100 cost about 30 % on create→Ready p99
	// (the benchmark).
	// Measured: docs/benchmark.md. // fork:line bench
	defaultEventQPS   = 10
	defaultEventBurst = 25

	// defaultMetricsAddr and defaultProbeAddr are kubebuilder's scaffold:
	// metrics off unless asked for (the Deployment asks), probes on the
	// port its manifests use.
	defaultMetricsAddr = disabledAddr
	defaultProbeAddr   = ":8081"

	// fork:begin v2
	// defaultWebhookAddr is kubebuilder's webhook port, the Service's
	// targetPort. The webhook serves only when the CRD converts through
	// one (webhook.go).
	defaultWebhookAddr = ":9443"
	// fork:end v2
	// defaultPprofAddr is off, as controller-runtime's PprofBindAddress:
	// profiles are for an engineer looking into the process, not for
	// every deployment.
	defaultPprofAddr = disabledAddr

	// Leader election: kube-controller-manager's timings and our name.
	defaultLeaderElectionID = "book-controller"
	defaultLeaseDuration    = 15 * time.Second
	defaultRenewDeadline    = 10 * time.Second
	defaultRetryPeriod      = 2 * time.Second

	// DefaultUserAgent starts the user agent when RESTConfig has none; Run
	// appends the replica's identity.
	DefaultUserAgent = "book-controller"
)

// Defaults returns the settings book-controller runs with when no flag says
// otherwise. RESTConfig, Namespace and the leader-election namespace and
// identity are left empty: they depend on where the process runs.
func Defaults() Config {
	return Config{
		Workers:      defaultWorkers,
		Shards:       defaultShards, // fork:line shards
		ResyncPeriod: defaultResyncPeriod,
		Controller: controller.Options{
			ConflictRecheck: controller.DefaultConflictRecheck,
			DrainTimeout:    controller.DefaultDrainTimeout,
		},
		LeaderElection: LeaderElection{
			ID:            defaultLeaderElectionID,
			LeaseDuration: defaultLeaseDuration,
			RenewDeadline: defaultRenewDeadline,
			RetryPeriod:   defaultRetryPeriod,
		},
		MetricsAddr: defaultMetricsAddr,
		ProbeAddr:   defaultProbeAddr,
		PprofAddr:   defaultPprofAddr,
		UIAddr:      disabledAddr,                      // fork:line ui
		Webhook:     Webhook{Addr: defaultWebhookAddr}, // fork:line v2
		EventQPS:    defaultEventQPS,
		EventBurst:  defaultEventBurst,
		// fork:begin v2
		StorageMigration: true,
		// fork:end v2
	}
}

// withDefaults fills the fields a programmatic caller left zero, where zero
// does not already mean something (a zero ResyncPeriod, EventQPS or address
// means off). The leader-election namespace and identity are found from the
// environment.
func withDefaults(cfg Config) Config {
	if cfg.Workers == 0 {
		cfg.Workers = defaultWorkers
	}
	le := &cfg.LeaderElection
	if le.ID == "" {
		le.ID = defaultLeaderElectionID
	}
	if le.Namespace == "" {
		le.Namespace = leader.PodNamespace()
	}
	if le.Identity == "" {
		le.Identity = leader.DefaultIdentity()
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = defaultLeaseDuration
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = defaultRenewDeadline
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = defaultRetryPeriod
	}
	return cfg
}
