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
	"github.com/prometheus/client_golang/prometheus"
)

// managerMetrics are the metrics that belong to one manager rather than to
// the process: they are served next to pkg/metrics.Registry.
type managerMetrics struct {
	registry *prometheus.Registry
	// fenced counts the writes the fence refused.
	fenced prometheus.Counter
}

func newManagerMetrics() *managerMetrics {
	m := &managerMetrics{
		registry: prometheus.NewRegistry(),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "book_controller_writes_fenced_total",
			Help: "API writes refused because this replica did not hold (or could no longer prove it held) the leader-election Lease.",
		}),
	}
	m.registry.MustRegister(m.fenced)
	return m
}

// watch registers the metrics that read the manager's state: whether it
// leads (under the name controller-runtime and Kubernetes components use)
// and how many Books and ConfigMaps its caches hold.
func (m *managerMetrics) watch(leaseID string, leading func() bool, cachedBooks, cachedConfigMaps func() int) {
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "leader_election_master_status",
		Help:        "1 when this replica is the leader (or runs without leader election), 0 when it stands by.",
		ConstLabels: prometheus.Labels{"name": leaseID},
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	})
	cached := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "book_controller_cached_books",
		Help: "Number of Books in the informer cache.",
	}, func() float64 { return float64(cachedBooks()) })
	cachedCMs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "book_controller_cached_configmaps",
		Help: "Number of ConfigMaps in the informer cache.",
	}, func() float64 { return float64(cachedConfigMaps()) })
	m.registry.MustRegister(leader, cached, cachedCMs)
}
