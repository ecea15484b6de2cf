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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestLiveChangeOvertakesTheBackfill: a controller starts over n Books
// whose ConfigMaps were all edited while it was down, so its initial list
// brings n repairs (the backfill), handed to a single worker. A Book
// created, and one whose spec was edited, while it was down come in the
// same list but are live changes, done first. A Book created once the
// caches are synced is a live change too: with the live-first
// order it is Ready while most of the backfill still waits; in arrival
// order (--live-first=false) it waits behind nearly all of it. The second
// case proves the first one had a backlog to overtake.
func TestLiveChangeOvertakesTheBackfill(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name string
		fifo bool
	}{{"live-first", false}, {"arrival order", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			first := env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 8})
			env.CreateBooks(t, ns, "book", n)
			env.WaitForBooksReady(t, ns, n)
			if err := first.Stop(); err != nil {
				t.Fatal(err)
			}
			tamperConfigMaps(t, ns, n)
			createdWhileDown, editedWhileDown := changeSpecsWhileDown(t, ns)

			probe := framework.FreeAddr(t)
			env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 1, ProbeAddr: probe, Off: controller.Layers{LiveFirst: tc.fifo}, On: controller.Layers{LiveFirst: !tc.fifo}})
			framework.Eventually(t, "the restarted controller's caches", framework.AnswersOK(probe, "/readyz"))
			if !tc.fifo {
				// The list brings these two with specs no sync has answered:
				// live changes, not backfill.
				env.WaitForReady(t, ns, createdWhileDown, metav1.ConditionTrue, controller.ReasonConfigMapReady)
				framework.Eventually(t, "the ConfigMap of the Book edited while down", titleIs(ns, editedWhileDown, "Edited while down"))
				waiting := countTampered(t, ns)
				t.Logf("live-first: the Books created and edited while down were done with %d of %d repairs still waiting", waiting, n)
				if waiting < n/2 {
					t.Errorf("live-first: %d of %d repairs were left when the Books changed while down were done, want at least %d: they waited as backfill", waiting, n, n/2)
				}
			}

			created := time.Now()
			if _, err := env.Books.WebappV2().Books(ns).Create(context.Background(),
				framework.NewBook(ns, "live", "Created during the backfill", 1), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			env.WaitForReady(t, ns, "live", metav1.ConditionTrue, controller.ReasonConfigMapReady)
			latency := time.Since(created)
			waiting := countTampered(t, ns)
			framework.Eventually(t, "the backfill repaired", func(ctx context.Context) error {
				left := countTampered(t, ns)
				return poll.Done(left == 0, "%d ConfigMaps still tampered", left)
			})
			backfill := time.Since(created)
			t.Logf("%s: the live Book was Ready after %v with %d of %d repairs still waiting; the backfill ended after %v",
				tc.name, latency.Round(time.Millisecond), waiting, n, backfill.Round(time.Millisecond))

			if !tc.fifo && waiting < n/2 {
				t.Errorf("live-first: %d of %d repairs were left when the live Book was Ready, want at least %d: it waited behind the backfill", waiting, n, n/2)
			}
			if tc.fifo && waiting > n/10 {
				t.Errorf("arrival order: %d of %d repairs were left when the live Book was Ready, want at most %d: there was no backlog to overtake", waiting, n, n/10)
			}
		})
	}
}

// changeSpecsWhileDown creates a Book and edits the spec of book-00150, as
// users would while the controller is down, and returns their names.
func changeSpecsWhileDown(t *testing.T, ns string) (created, edited string) {
	t.Helper()
	books := env.Books.WebappV2().Books(ns)
	if _, err := books.Create(context.Background(), framework.NewBook(ns, "created-while-down", "New", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	book, err := books.Get(context.Background(), framework.BookName("book", 150), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	book.Spec.Title = "Edited while down"
	if _, err := books.Update(context.Background(), book, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return "created-while-down", framework.BookName("book", 150)
}

// titleIs is done once the ConfigMap name holds title.
func titleIs(ns, name, title string) func(context.Context) error {
	return func(ctx context.Context) error {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return poll.Done(cm.Data[controller.TitleKey] == title, "title %q", cm.Data[controller.TitleKey])
	}
}

// tamperConfigMaps rewrites the title in the n Books' ConfigMaps, as a
// user would while the controller is down.
func tamperConfigMaps(t *testing.T, ns string, n int) {
	t.Helper()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	framework.Parallel(t, n, 16, func(ctx context.Context, i int) error {
		cm, err := cms.Get(ctx, framework.BookName("book", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data[controller.TitleKey] = "tampered"
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

func countTampered(t *testing.T, ns string) int {
	t.Helper()
	list, err := env.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return countWith(list.Items, func(cm corev1.ConfigMap) bool { return cm.Data[controller.TitleKey] == "tampered" })
}

func countWith[T any](items []T, pred func(T) bool) int {
	n := 0
	for _, it := range items {
		if pred(it) {
			n++
		}
	}
	return n
}
