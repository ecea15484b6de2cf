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

package binary_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestOwnWritesDoNotComeBackAsWork checks, on a process of its own (whose
// metrics no other controller shares), that the watch events of the
// controller's own writes (the ConfigMap it creates, the status it writes)
// queue nothing: each new Book is synced once. Somebody else's changes,
// made after those writes, are heard and acted on; they are also the
// markers that make the count mean something: each informer hands on its
// watch's events in order, so once the controller has acted on a Book
// edit made after every status write, and on a ConfigMap edit made after
// every ConfigMap create, it has seen the echoes of all of them.
func TestOwnWritesDoNotComeBackAsWork(t *testing.T) {
	ctx := context.Background()
	if err := framework.InstallCRD(ctx, env.Extensions); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	metricsAddr, probeAddr := framework.FreeAddr(t), framework.FreeAddr(t)
	framework.StartProcess(t, "book-controller", binary, "-kubeconfig", env.Cluster.KubeconfigPath(), "--namespace", ns,
		"--leader-elect=false", "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr)
	framework.Eventually(t, "/readyz to answer 200 once caches sync", framework.AnswersOK(probeAddr, "/readyz"))

	const n = 20
	books := env.CreateBooks(t, ns, "echo", n)
	env.WaitForBooksReady(t, ns, n)

	// The Book marker: a change by somebody else, after our writes, is no
	// echo.
	first, second := books[0].Name, books[1].Name
	book, err := env.Books.WebappV2().Books(ns).Get(ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	book.Spec.Title = "changed"
	if _, err := env.Books.WebappV2().Books(ns).Update(ctx, book, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMap(t, ns, first, "to hold the new title", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "changed"
	})
	// The ConfigMap marker: an edit by hand, repaired.
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, second, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := cm.Data["title"]
	cm.Data["title"] = "edited by hand"
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMap(t, ns, second, "to be repaired", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == want
	})

	metric := func(name string, labels ...string) float64 {
		t.Helper()
		v, err := framework.MetricValue(framework.Scrape(t, metricsAddr), name, labels...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const syncs = n + 2 // one per new Book, one per marker
	if v := metric("workqueue_adds_total", "name", "book"); v != syncs {
		t.Errorf("workqueue_adds_total = %v after %d new Books and 2 changes by somebody else, want %d: one sync each, none for the echoes of our writes", v, n, syncs)
	}
	if v := metric("book_controller_reconcile_total", "controller", "book", "result", "success"); v != syncs {
		t.Errorf("book_controller_reconcile_total{result=success} = %v, want %d", v, syncs)
	}
}
