package metrics

import "github.com/prometheus/client_golang/prometheus"

// Gauge is new and undocumented.
var Gauge = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "book", Subsystem: "controller", Name: "new_gauge"})
