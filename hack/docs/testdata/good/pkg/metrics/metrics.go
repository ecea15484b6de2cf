package metrics

import "github.com/prometheus/client_golang/prometheus"

// Syncs counts syncs (pkg/controller/status.go).
var Syncs = prometheus.NewCounter(prometheus.CounterOpts{Name: "book_controller_syncs_total"})
