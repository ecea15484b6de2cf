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
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestOwnWritesDoNotComeBackAsWork checks, on a process of its own (whose
// metrics no other controller shares), that the watch events of the
// controller's own writes (the ConfigMap it creates, the status it writes)
// queue nothing: each new Book is synced once. Somebody else's change made
// after those writes is still heard and acted on.
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
	for i := range n {
		if _, err := env.Books.WebappV1().Books(ns).Create(ctx,
			framework.NewBook(ns, fmt.Sprintf("echo-%02d", i), "t", int32(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		env.WaitForReady(t, ns, fmt.Sprintf("echo-%02d", i), metav1.ConditionTrue, "ConfigMapReady")
	}
	// Ready as the API server tells it; give our informers the same events.
	time.Sleep(2 * time.Second)
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		v, err := framework.MetricValue(framework.Scrape(t, metricsAddr), name, labels...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := metric("workqueue_adds_total", "name", "book"); v != n {
		t.Errorf("workqueue_adds_total = %v after %d new Books, want %d: one sync each, none for the echoes of our writes", v, n, n)
	}
	if v := metric("book_controller_reconcile_total", "controller", "book", "result", "success"); v != n {
		t.Errorf("book_controller_reconcile_total{result=success} = %v, want %d", v, n)
	}

	// A change by somebody else, after our writes, is no echo.
	book, err := env.Books.WebappV1().Books(ns).Get(ctx, "echo-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	book.Spec.Title = "changed"
	if _, err := env.Books.WebappV1().Books(ns).Update(ctx, book, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMap(t, ns, "echo-00", "to hold the new title", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "changed"
	})
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "echo-01", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["title"] = "edited by hand"
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMap(t, ns, "echo-01", "to be repaired", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "t"
	})
}
