//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestSecondWriter has a second writer change the specs of 50 Books
// continuously for CHAOS_WRITER_DURATION while the in-process controller
// works. In the end every Book's ConfigMap and status.observedGeneration
// match its last spec, and the 409 conflicts the race causes are absorbed
// without a hot loop: reconciles stay within a small multiple of the spec
// changes.
//
// The reconcile counters are process-wide, so this test takes before/after
// deltas and must not run in parallel with another in-process controller.
func TestSecondWriter(t *testing.T) {
	rng := newRand(t)
	ns := env.Namespace(t)
	n := min(50, config.books)
	want := createBooks(t, ns, "book", n)
	names := make([]string, 0, n)
	for i := range n {
		names = append(names, bookName("book", i))
	}

	var requests framework.RequestCounter
	metricsAddr := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr,
		RESTConfig: requests.Wrap(env.ControllerServiceAccountConfig(t))})
	waitMetricsUp(t, metricsAddr)
	settle(t, ns, expectation{want: want}, metricsAddr)

	reconciles := func() (total, conflicts, errs float64) {
		total = metricValue(t, metricsAddr, "book_controller_reconcile_total", "controller", controller.Name)
		conflicts = metricValue(t, metricsAddr, "book_controller_reconcile_total", "controller", controller.Name, "result", "conflict")
		errs = metricValue(t, metricsAddr, "book_controller_reconcile_errors_total", "controller", controller.Name)
		return
	}
	total0, conflicts0, errs0 := reconciles()
	writes0 := len(requests.ObjectWrites())

	// The second writer: two goroutines, each changing a random Book's
	// spec every 25ms, reading it first (its own 409s are retried).
	type lastWrite struct {
		s   spec
		gen int64
	}
	var (
		mu             sync.Mutex
		last           = map[string]lastWrite{}
		changes        atomic.Int64
		writerConflict atomic.Int64
		seq            atomic.Int64
	)
	ctx, cancel := context.WithTimeout(context.Background(), config.writerDuration)
	defer cancel()
	books := env.Books.WebappV2().Books(ns)
	var wg sync.WaitGroup
	for range 2 {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				// Requests get a context of their own: one cancelled at the
				// deadline might still have been applied by the server,
				// unbeknownst to our record of the last spec.
				req := context.Background()
				name := names[r.IntN(len(names))]
				b, err := books.Get(req, name, metav1.GetOptions{})
				if err != nil {
					t.Errorf("second writer: %v", err)
					return
				}
				i := seq.Add(1)
				s := spec{title: fmt.Sprintf("%s edit %d", name, i), price: int32(r.Uint32() >> 1)}
				b.Spec.Title, b.Spec.Price = s.title, webappv2.WholePrice(s.price)
				updated, err := books.Update(req, b, metav1.UpdateOptions{})
				switch {
				case apierrors.IsConflict(err):
					writerConflict.Add(1)
					continue
				case err != nil:
					t.Errorf("second writer: %v", err)
					return
				}
				changes.Add(1)
				mu.Lock()
				if updated.Generation > last[name].gen {
					last[name] = lastWrite{s: s, gen: updated.Generation}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for name, lw := range last {
		want[name] = lw.s
	}

	took := waitConverged(t, ns, expectation{want: want})
	waitReconcilesQuiet(t, metricsAddr, 2*time.Second)
	total1, conflicts1, errs1 := reconciles()
	dTotal, dConflicts, dErrs := total1-total0, conflicts1-conflicts0, errs1-errs0
	var cmWrites, statusWrites, eventWrites int
	for _, r := range requests.ObjectWrites()[writes0:] {
		switch {
		case strings.Contains(r.Path, "/events"):
			eventWrites++
		case strings.HasSuffix(r.Path, "/status"):
			statusWrites++
		case strings.Contains(r.Path, "/configmaps"):
			cmWrites++
		}
	}
	dWrites := len(requests.ObjectWrites()) - writes0
	c := float64(changes.Load())
	if c == 0 {
		t.Fatal("the second writer changed nothing")
	}
	t.Logf("%d spec changes (%d writer conflicts), %v reconciles, %v of them 409 conflicts, %v errors, %d controller writes",
		changes.Load(), writerConflict.Load(), dTotal, dConflicts, dErrs, dWrites)
	// A spec change costs one sync that writes ConfigMap and status, and
	// up to two that find nothing to do (the watch events of those two
	// writes); a conflict costs one more. Anything beyond that, plus a
	// little slack per Book, would be a hot loop.
	if limit := 4*c + float64(2*n); dTotal > limit {
		t.Errorf("%v reconciles for %v spec changes, want at most %v", dTotal, c, limit)
	}
	if dConflicts > c {
		t.Errorf("%v conflicts for %v spec changes, want at most one per change", dConflicts, c)
	}
	if dErrs != 0 {
		t.Errorf("%v sync errors (other than conflicts), want 0", dErrs)
	}
	figure(t, "%d spec changes to %d Books in %v: %.2f reconciles per change (%v reconciles, %v of them 409 conflicts = %.3f per change, %v errors); %.2f controller writes per change (%d ConfigMap, %d status, %d event); converged %v after the last change",
		changes.Load(), n, config.writerDuration, dTotal/c, dTotal, dConflicts, dConflicts/c, dErrs,
		float64(dWrites)/c, cmWrites, statusWrites, eventWrites, took.Round(100*time.Millisecond))
}

// settle waits, without counting toward the run's tally, until the
// namespace matches exp and the controller has stopped reconciling.
func settle(t *testing.T, ns string, exp expectation, metricsAddr string) {
	t.Helper()
	if _, err := converge(t.Context(), ns, exp); err != nil {
		t.Fatal(err)
	}
	waitReconcilesQuiet(t, metricsAddr, 2*time.Second)
}

// waitReconcilesQuiet waits until the reconcile count has not moved for quiet.
func waitReconcilesQuiet(t *testing.T, metricsAddr string, quiet time.Duration) {
	t.Helper()
	count := func() float64 {
		return metricValue(t, metricsAddr, "book_controller_reconcile_total", "controller", controller.Name)
	}
	poll.Eventually(t, "reconciles to stop", pollInterval, 2*time.Minute, poll.Unchanged(quiet, count))
}
