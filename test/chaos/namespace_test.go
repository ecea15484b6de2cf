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
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestNamespaceDeleted deletes the namespace while its Books converge. From
// then on every ConfigMap create there is Forbidden (NamespaceTerminating)
// until the namespace controller has deleted the Books; the controller must
// not turn that into an error storm, and its queue must end empty.
//
// Error counts are taken from the in-process controller's metrics as
// before/after deltas, so this test must not run in parallel with another
// in-process controller.
func TestNamespaceDeleted(t *testing.T) {
	ctx := context.Background()
	rng := newRand(t)
	ns := env.Namespace(t)
	n := config.books
	createBooks(t, ns, "book", n)

	metricsAddr := framework.FreeAddr(t)
	rc := env.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr})
	waitMetricsUp(t, metricsAddr)
	errors := func() float64 {
		return metricValue(t, metricsAddr, "book_controller_reconcile_errors_total", "controller", controller.Name)
	}
	total := func() float64 {
		return metricValue(t, metricsAddr, "book_controller_reconcile_total", "controller", controller.Name)
	}
	depth := func() float64 { return metricValue(t, metricsAddr, "workqueue_depth", "name", controller.Name) }
	errs0, base := errors(), reconciledOK(t, metricsAddr)
	if d := depth(); d < 0 {
		t.Fatalf("workqueue_depth is %v", d)
	}

	at := n/10 + rng.IntN(n/2)
	synced := waitSynced(t, metricsAddr, base, at, n)
	total0 := total()
	deletedAt := time.Now()
	if err := env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	faults.Add(1)
	t.Logf("deleted namespace %s after %d of %d Books synced", ns, synced, n)

	poll.Eventually(t, "the namespace to be gone", pollInterval, convergeTimeout(n), func(ctx context.Context) error {
		got, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
		}
		return poll.Done(apierrors.IsNotFound(err), "%v", err)
	})
	gone := time.Since(deletedAt)
	poll.Eventually(t, "workqueue_depth{name=book} to return to 0", pollInterval, time.Minute, func(context.Context) error {
		d := depth()
		return poll.Done(d == 0, "workqueue_depth %v", d)
	})
	waitReconcilesQuiet(t, metricsAddr, 3*time.Second)
	if d := depth(); d != 0 {
		t.Errorf("workqueue_depth{name=book} = %v after the namespace is gone, want 0", d)
	}
	select {
	case <-rc.Exited():
		t.Fatalf("the controller's Run returned: %v", rc.Err())
	default:
	}

	errs := errors() - errs0
	reconciles := total() - total0
	// A Book synced while its namespace terminates may fail once or twice
	// (a status write racing the Book's deletion); a storm would be every
	// unsynced Book failing again and again until it is deleted.
	if limit := float64(max(10, n/20)); errs > limit {
		t.Errorf("%v sync errors while the namespace was deleted, want at most %v", errs, limit)
	}
	figure(t, "namespace deleted after %d/%d Books synced: gone in %v; %v sync errors, %v reconciles meanwhile; workqueue_depth back to 0",
		synced, n, gone.Round(100*time.Millisecond), errs, reconciles)
}
