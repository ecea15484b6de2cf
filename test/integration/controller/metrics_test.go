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

package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestMetricsAndProbes scrapes /metrics and parses it, the way Prometheus
// does, and checks the probes' answers, and that the counters move by
// exactly the work done. The counters are process-wide, shared by every
// controller this test binary runs: the test is not parallel, so that no
// other controller runs while it counts (Go runs the parallel tests only
// once every sequential one has returned).
func TestMetricsAndProbes(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	metricsAddr, probeAddr := framework.FreeAddr(t), framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr, ProbeAddr: probeAddr})

	framework.Eventually(t, "/readyz to answer 200 once caches sync", framework.AnswersOK(probeAddr, "/readyz"))
	if code, _, err := framework.HTTPGet(probeAddr, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: code %d, err %v", code, err)
	}

	before := framework.Scrape(t, metricsAddr)
	for _, name := range []string{
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds",
		"workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds",
		"workqueue_longest_running_processor_seconds", "workqueue_retries_total",
		"book_controller_reconcile_total", "book_controller_reconcile_errors_total",
		"book_controller_reconcile_panics_total", "book_controller_reconcile_time_seconds",
		"book_controller_active_workers", "rest_client_requests_total",
		"rest_client_request_duration_seconds", "leader_election_master_status",
		"book_controller_cached_books", "go_goroutines", "process_resident_memory_bytes",
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("metric %s is not exported", name)
		}
	}

	const n = 3
	for i := range n {
		name := fmt.Sprintf("m-%d", i)
		if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, name, "t", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
		// Events are sent in the background: wait for each.
		env.WaitForEvent(t, ns, name, "Normal", "ConfigMapCreated")
	}
	after := framework.Scrape(t, metricsAddr)

	// No other controller runs: each counter moved by this test's work
	// alone. The REST client counters are the whole process's: the test's
	// own client created the n Books.
	delta := func(name string, labels ...string) float64 {
		t.Helper()
		b, _ := framework.MetricValue(before, name, labels...)
		a, err := framework.MetricValue(after, name, labels...)
		if err != nil {
			t.Error(err)
		}
		return a - b
	}
	moved := func(name string, want float64, labels ...string) {
		t.Helper()
		if d := delta(name, labels...); d != want {
			t.Errorf("%s%v moved by %v, want %v", name, labels, d, want)
		}
	}
	if !framework.LayersOff().OwnWrites {
		moved("book_controller_reconcile_total", n, "controller", "book", "result", "success")
		moved("book_controller_reconcile_time_seconds", n, "controller", "book")
		moved("workqueue_adds_total", n, "name", "book")
		moved("workqueue_work_duration_seconds", n, "name", "book")
		moved("rest_client_requests_total", 3*n, "method", "POST") // the Books, their ConfigMaps and Events
		moved("rest_client_requests_total", n, "method", "PUT")    // the Books' status
	} else {
		// sample-controller's loop, with no echo skip: the events of the
		// sync's own writes bring each Book back, and a sync that meets the
		// cached Book before its status update conflicts and is retried.
		// Still, every key added is synced once, at least one sync per Book
		// succeeds, and nothing is created twice.
		adds := delta("workqueue_adds_total", "name", "book")
		if adds < n {
			t.Errorf("workqueue_adds_total moved by %v, want at least %d", adds, n)
		}
		moved("workqueue_work_duration_seconds", adds, "name", "book")
		moved("book_controller_reconcile_time_seconds", adds, "controller", "book")
		if ok := delta("book_controller_reconcile_total", "controller", "book", "result", "success"); ok < n {
			t.Errorf("successful syncs moved by %v, want at least %d", ok, n)
		}
		moved("rest_client_requests_total", 3*n, "method", "POST")
		if puts := delta("rest_client_requests_total", "method", "PUT"); puts < n {
			t.Errorf("PUTs moved by %v, want at least %d (the Books' status)", puts, n)
		}
	}

	if v, _ := framework.MetricValue(after, "leader_election_master_status"); v != 1 {
		t.Errorf("leader_election_master_status = %v without leader election, want 1", v)
	}
	// The cache-size gauges count the cache at most once a second.
	framework.Eventually(t, fmt.Sprintf("book_controller_cached_books to read %d", n), func(context.Context) error {
		families, err := framework.ScrapeMetrics(metricsAddr)
		if err != nil {
			return err
		}
		if v, _ := framework.MetricValue(families, "book_controller_cached_books"); v != n {
			return fmt.Errorf("book_controller_cached_books = %v, want %d", v, n)
		}
		return nil
	})
}
