// Package metrics defines the controller's Prometheus metrics and installs
// them into client-go's hooks. The names match what controller-runtime
// exports where the meaning is the same (workqueue_*, rest_client_*,
// leader_election_master_status), so existing dashboards work unchanged.
//
// client-go's metric hooks (workqueue.SetProvider, tools/metrics.Register)
// are process-wide and take effect once, so the collectors behind them live
// in one process-wide Registry, installed when this package is imported.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry holds every process-wide metric: Go runtime and process metrics,
// workqueue, REST client and reconcile metrics.
var Registry = prometheus.NewRegistry()

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	registerWorkqueueMetrics()
	registerClientGoMetrics()
	registerReconcileMetrics()
}
