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
