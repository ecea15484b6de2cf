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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestNotReadyFiguresFollowTheBooks: the alert's gauges, scraped as
// Prometheus would, against the Book's condition as the API server holds
// it: a Book kept from its ConfigMap counts as not Ready since its Ready
// condition's lastTransitionTime, and stops counting once it is Ready. Not
// parallel: the gauges are the process's, over every controller running.
func TestNotReadyFiguresFollowTheBooks(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	metricsAddr := framework.FreeAddr(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr,
		On: controller.Layers{NotReadyGauge: true}})
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "taken", "T", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	book := env.WaitForReady(t, ns, "taken", metav1.ConditionFalse, controller.ReasonConfigMapConflict)
	since := meta.FindStatusCondition(book.Status.Conditions, controller.ConditionReady).LastTransitionTime.Unix()
	framework.Eventually(t, "the not-Ready gauges", gauges(metricsAddr, 1, float64(since)))

	if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "taken", metav1.ConditionTrue, controller.ReasonConfigMapReady)
	framework.Eventually(t, "the not-Ready gauges back to 0", gauges(metricsAddr, 0, 0))
}

func gauges(addr string, count, since float64) poll.Check {
	return func(context.Context) error {
		m, err := framework.ScrapeMetrics(addr)
		if err != nil {
			return err
		}
		n, _ := framework.MetricValue(m, "book_controller_books_not_ready")
		s, _ := framework.MetricValue(m, "book_controller_not_ready_since_timestamp_seconds")
		return poll.Done(n == count && s == since, "books_not_ready %v, not_ready_since %v; want %v, %v", n, s, count, since)
	}
}
