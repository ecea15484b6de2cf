package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"net/http"
)

// Handler serves the process-wide Registry plus the collectors of one
// manager (leader status, cache size), in Prometheus text format.
func Handler(extra *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{Registry, extra}, promhttp.HandlerOpts{})
}
