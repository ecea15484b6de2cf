package manager

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	booklisters "ydzs.io/book-controller/pkg/generated/listers/webapp/v1"
)

// managerMetrics are the metrics that belong to one manager rather than to
// the process: they are served next to pkg/metrics.Registry.
type managerMetrics struct {
	registry *prometheus.Registry
	leader   prometheus.Gauge
}

func newManagerMetrics(le LeaderElection, books booklisters.BookLister) *managerMetrics {
	id := le.ID
	if id == "" {
		id = DefaultLeaderElectionID
	}
	m := &managerMetrics{
		registry: prometheus.NewRegistry(),
		// The name controller-runtime and Kubernetes components use.
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "leader_election_master_status",
			Help:        "1 when this replica is the leader (or runs without leader election), 0 when it stands by.",
			ConstLabels: prometheus.Labels{"name": id},
		}),
	}
	cached := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "book_controller_cached_books",
		Help: "Number of Books in the informer cache.",
	}, func() float64 {
		list, err := books.List(labels.Everything())
		if err != nil {
			return 0
		}
		return float64(len(list))
	})
	m.registry.MustRegister(m.leader, cached)
	return m
}
