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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestEventsOverTheRateAreDropped: with --event-qps 1 and a burst of 5, a
// burst of 40 new Books all become Ready, while the API server receives
// only the Events the token bucket allowed: the burst, plus one per second
// of the run.
func TestEventsOverTheRateAreDropped(t *testing.T) {
	t.Parallel()
	const n, burst = 40, 5
	ns := env.Namespace(t)
	start := time.Now()
	env.StartController(t, framework.ControllerOptions{Namespace: ns, Workers: 16, EventQPS: 1, EventBurst: burst})

	env.CreateBooks(t, ns, "book", n)
	env.WaitForBooksReady(t, ns, n)
	created := 0
	// Events are sent in the background: wait for the burst to land.
	framework.Eventually(t, fmt.Sprintf("at least %d ConfigMapCreated Events", burst), func(ctx context.Context) error {
		list, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		created = 0
		for _, ev := range list.Items {
			if ev.Reason == "ConfigMapCreated" {
				created++
			}
		}
		if created < burst {
			return fmt.Errorf("%d so far", created)
		}
		return nil
	})
	allowed := burst + int(time.Since(start).Seconds()) + 1
	if created > allowed || created >= n {
		t.Errorf("%d ConfigMapCreated Events for %d new Books; want at most the burst plus one per second of the run (%d)",
			created, n, allowed)
	}
}
