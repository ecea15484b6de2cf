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
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/metrics"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestRestartOverConvergedBooksMakesNoWrites proves the sync writes only on a
// difference: a fresh controller process, whose queue is filled with every
// Book by the initial list, must sync every Book and find nothing to change.
// Syncing is counted with the process-wide reconcile counter, which is why
// this test is not parallel: no other controller runs while it does.
func TestRestartOverConvergedBooksMakesNoWrites(t *testing.T) {
	const n = 200
	ctx := context.Background()
	ns := env.Namespace(t)
	first := env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 8})

	createBooks(t, ns, n)
	framework.Eventually(t, fmt.Sprintf("%d Books Ready", n), allReady(ns, n))
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	synced := metrics.ReconcileTotal.WithLabelValues(controller.Name, metrics.ResultSuccess)
	syncedBefore := testutil.ToFloat64(synced)
	var counter framework.RequestCounter
	startedAt := time.Now()
	env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 8,
		RESTConfig: counter.Wrap(env.ControllerServiceAccountConfig(t)), LeaderElection: manager.LeaderElection{Identity: "restarted"}})
	// Synced and idle: the initial lists (and the preflight) are done, and
	// the request count has stopped moving for a while, long enough for 200
	// queued syncs to have run many times over.
	framework.Eventually(t, "the restarted controller to list its caches", func(context.Context) error {
		gets := counter.Gets()
		return poll.Done(gets >= 3, "%d GETs", gets)
	})
	framework.Eventually(t, fmt.Sprintf("the restarted controller to sync all %d Books", n), func(context.Context) error {
		syncs := testutil.ToFloat64(synced) - syncedBefore
		return poll.Done(syncs >= n, "%v successful syncs", syncs)
	})
	waitQuiet(t, &counter, 3*time.Second)
	if w := counter.Writes(); w != 0 {
		t.Errorf("restart over %d converged Books made %d API writes, want 0", n, w)
	}
	// The API server's view: nothing written by the restarted replica.
	var written []framework.AuditWrite
	for _, w := range framework.ControllerWrites(env.AuditLog(t), ns) {
		if w.Writer == "restarted" || w.At.After(startedAt) {
			written = append(written, w)
		}
	}
	if len(written) != 0 {
		t.Errorf("the audit log shows %d writes after the restart: %v", len(written), written)
	}
	if err := allReady(ns, n)(ctx); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

func createBooks(t *testing.T, ns string, n int) {
	t.Helper()
	forEach(t, "creating Books", n, func(i int) error {
		name := fmt.Sprintf("book-%04d", i)
		_, err := env.Books.WebappV1().Books(ns).Create(context.Background(),
			framework.NewBook(ns, name, "Title "+name, int32(i)), metav1.CreateOptions{})
		return err
	})
}

// forEach runs do(0) … do(n-1), 16 at a time, and fails the test with the
// first error.
func forEach(t *testing.T, what string, n int, do func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- do(i)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// allReady is a check that the n Books in ns are all Ready for their
// current generation.
func allReady(ns string, n int) poll.Check {
	return func(ctx context.Context) error {
		list, err := env.Books.WebappV1().Books(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, b := range list.Items {
			for _, c := range b.Status.Conditions {
				if c.Type == "Ready" && c.Status == metav1.ConditionTrue && c.ObservedGeneration == b.Generation {
					ready++
				}
			}
		}
		return poll.Done(ready == n, "%d of %d Books Ready", ready, len(list.Items))
	}
}

// waitQuiet waits until no request has gone through counter for quiet.
func waitQuiet(t *testing.T, counter *framework.RequestCounter, quiet time.Duration) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("the controller to go idle (no request for %v)", quiet),
		poll.Unchanged(quiet, func() int { return counter.Gets() + counter.Writes() }))
}
