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
	"slices"
	"strings"
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
//
// A Book created once every Book has been synced is the marker that makes
// "no writes" mean something: its Event is sent after any Event the syncs
// before it could have sent (one sender, in order), and the audit log read
// after it holds every write begun before. Its own three writes (ConfigMap,
// status, Event) are the only ones allowed.
func TestRestartOverConvergedBooksMakesNoWrites(t *testing.T) {
	const n = 200
	ctx := context.Background()
	ns := env.Namespace(t)
	first := env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 8})

	env.CreateBooks(t, ns, "book", n)
	env.WaitForBooksReady(t, ns, n)
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	synced := metrics.ReconcileTotal.WithLabelValues(controller.Name, metrics.ResultSuccess)
	syncedBefore := testutil.ToFloat64(synced)
	var counter framework.RequestCounter
	startedAt := time.Now()
	env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 8,
		RESTConfig: counter.Wrap(env.ControllerServiceAccountConfig(t)), LeaderElection: manager.LeaderElection{Identity: "restarted"}})
	framework.Eventually(t, fmt.Sprintf("the restarted controller to sync all %d Books", n), func(context.Context) error {
		syncs := testutil.ToFloat64(synced) - syncedBefore
		return poll.Done(syncs >= n, "%v successful syncs", syncs)
	})
	if w := counter.ObjectWrites(); len(w) != 0 {
		t.Errorf("restart over %d converged Books made %d API writes while syncing them, want 0: %v", n, len(w), w)
	}

	const marker = "marker"
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, marker, "after the restart", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, marker, metav1.ConditionTrue, controller.ReasonConfigMapReady)
	env.WaitForEvent(t, ns, marker, "Normal", controller.EventConfigMapCreated)

	var writes []string
	for _, r := range counter.ObjectWrites() {
		writes = append(writes, r.Method+" "+r.Path)
	}
	slices.Sort(writes)
	want := []string{
		http.MethodPost + " /api/v1/namespaces/" + ns + "/configmaps",
		http.MethodPost + " /apis/events.k8s.io/v1/namespaces/" + ns + "/events",
		http.MethodPut + " /apis/webapp.ydzs.io/v2/namespaces/" + ns + "/books/" + marker + "/status",
	}
	if framework.LayersOff().OwnWrites {
		// sample-controller's loop: the marker's own echo may bring it back
		// to a sync that meets its cached status before the update and
		// conflicts, so its status may be written more than once.
		writes = slices.Compact(writes)
	}
	if !slices.Equal(writes, want) {
		t.Errorf("after a restart over %d converged Books and one new Book, the API writes were\n  %s\nwant the new Book's alone:\n  %s",
			n, strings.Join(writes, "\n  "), strings.Join(want, "\n  "))
	}
	// The API server's view: nothing written after the restart but the
	// marker's ConfigMap, status and Event.
	var written []framework.AuditWrite
	for _, w := range framework.ControllerWrites(env.AuditLog(t), ns) {
		if (w.Writer == "restarted" || w.At.After(startedAt)) && !strings.HasPrefix(w.Object, ns+"/"+marker) {
			written = append(written, w)
		}
	}
	if len(written) != 0 {
		t.Errorf("the audit log shows %d writes after the restart besides the new Book's: %v", len(written), written)
	}
	if err := env.BooksReady(ns, n+1)(ctx); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}
