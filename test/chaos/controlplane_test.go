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
	"maps"
	"slices"
	"testing"
	"time"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

// outage is how long a killed control-plane process stays down.
const outage = 5 * time.Second

// TestAPIServerKilled SIGKILLs kube-apiserver while Books converge and
// starts it again 5s later. The in-process controller (no leader election)
// must ride through: Run does not return, its watches are re-established
// (Books created and changed after the restart converge too), and every Book
// ends Ready with exactly one ConfigMap.
func TestAPIServerKilled(t *testing.T) {
	controlPlaneFault(t, "kube-apiserver", env.Cluster.KillAPIServer, env.Cluster.StartAPIServer)
}

// TestEtcdKilled does the same with etcd: the API server stays up but fails
// every request until etcd is back.
func TestEtcdKilled(t *testing.T) {
	controlPlaneFault(t, "etcd", env.Cluster.KillEtcd, env.Cluster.StartEtcd)
}

func controlPlaneFault(t *testing.T, what string, kill func() error, start func(context.Context) error) {
	rng := newRand(t)
	ns := env.Namespace(t)
	n := config.books
	want := createBooks(t, ns, "book", n)

	metricsAddr := framework.FreeAddr(t)
	rc := env.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr})
	waitMetricsUp(t, metricsAddr)
	base := reconciledOK(t, metricsAddr)

	// A random moment in the middle of convergence.
	at := n/10 + rng.IntN(n/2)
	synced := waitSynced(t, metricsAddr, base, at, n)
	if err := kill(); err != nil {
		t.Fatalf("killing %s: %v", what, err)
	}
	faults.Add(1)
	restartedOK := false
	t.Cleanup(func() {
		// The control plane is shared: never leave it down for the next test.
		if !restartedOK {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := start(ctx); err != nil {
				t.Errorf("starting %s again after a failure: %v", what, err)
			}
		}
	})
	t.Logf("SIGKILLed %s after %d of %d Books synced", what, synced, n)
	time.Sleep(outage)
	select {
	case <-rc.Exited():
		t.Fatalf("the controller's Run returned during the %s outage: %v", what, rc.Err())
	default:
	}
	restarted := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := start(ctx); err != nil {
		t.Fatalf("starting %s again: %v", what, err)
	}
	restartedOK = true
	t.Logf("%s is back after %v", what, time.Since(restarted).Round(time.Millisecond))

	// Work that only re-established watches can deliver: new Books, and
	// new specs for some old ones.
	maps.Copy(want, createBooks(t, ns, "after", max(1, n/10)))
	names := slices.Sorted(maps.Keys(want))
	changed := names[:max(1, n/20)]
	maps.Copy(want, updateSpecs(t, ns, changed, func(name string, old webappv2.BookSpec) spec {
		return spec{title: old.Title + " (revised)", price: old.Price.WholeUnits() + 1}
	}))

	waitConverged(t, ns, expectation{want: want})
	select {
	case <-rc.Exited():
		t.Fatalf("the controller's Run returned: %v", rc.Err())
	default:
	}
	figure(t, "%s down %v after %d/%d Books synced; all %d Books converged %v after it was back",
		what, outage, synced, n, len(want), time.Since(restarted).Round(100*time.Millisecond))
}
