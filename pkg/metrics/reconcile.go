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

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Results of one sync, the values of ReconcileTotal's "result" label.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	// ResultConflict is a 409 from the API server: our cache was behind and
	// the key is retried; not an error worth alerting on.
	ResultConflict = "conflict"
	// ResultRequeueAfter is a success that asked to be looked at again
	// later (controller.Result.RequeueAfter), controller-runtime's
	// "requeue_after".
	ResultRequeueAfter = "requeue_after"
)

// Reconcile metrics, labelled by controller name.
var (
	// ReconcileTotal counts syncs by result.
	ReconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "book_controller_reconcile_total",
		Help: "Total number of syncs per controller, by result (success, requeue_after, error, conflict).",
	}, []string{"controller", "result"})
	// ReconcileErrors counts syncs that returned an error (conflicts excluded).
	ReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "book_controller_reconcile_errors_total",
		Help: "Total number of sync errors per controller.",
	}, []string{"controller"})
	// ReconcilePanics counts syncs that panicked and were recovered.
	ReconcilePanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "book_controller_reconcile_panics_total",
		Help: "Total number of sync panics per controller.",
	}, []string{"controller"})
	// ReconcileTime is the duration of syncs.
	ReconcileTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "book_controller_reconcile_time_seconds",
		Help: "Length of time per sync per controller.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
			1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
	}, []string{"controller"})
	// EventsDropped counts Events not sent because they exceeded --event-qps.
	EventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "book_controller_events_dropped_total",
		Help: "Events not sent to the API server because they exceeded --event-qps.",
	})
	// BooksNotReady is the number of Books whose Ready condition is not
	// True (or missing), among those this replica syncs.
	BooksNotReady = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "book_controller_books_not_ready",
		Help: "Number of Books this replica syncs whose Ready condition is not True.",
	})
	// NotReadySince is when the longest-waiting of them stopped being
	// Ready (or was created), in Unix seconds; 0 when every Book is Ready.
	// The alert on Books not Ready for 10 minutes compares it with time().
	NotReadySince = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "book_controller_not_ready_since_timestamp_seconds",
		Help: "Unix time since which the longest-waiting not-Ready Book has not been Ready; 0 when all are Ready.",
	})
	// ActiveWorkers is the number of workers inside a sync right now.
	ActiveWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "book_controller_active_workers",
		Help: "Number of workers currently running a sync, per controller.",
	}, []string{"controller"})
)

func registerReconcileMetrics() {
	Registry.MustRegister(ReconcileTotal, ReconcileErrors, ReconcilePanics, ReconcileTime, ActiveWorkers, EventsDropped,
		BooksNotReady, NotReadySince)
}

// InitController creates a controller's series at zero, so they are exported,
// and rate() over them works, before its first sync.
func InitController(name string) {
	for _, result := range []string{ResultSuccess, ResultRequeueAfter, ResultError, ResultConflict} {
		ReconcileTotal.WithLabelValues(name, result)
	}
	ReconcileErrors.WithLabelValues(name)
	ReconcilePanics.WithLabelValues(name)
	ReconcileTime.WithLabelValues(name)
	ActiveWorkers.WithLabelValues(name)
}
