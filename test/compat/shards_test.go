//go:build compat

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

package compat_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// leaseNamespace is where the manifests' leader-election Role lets the
// controller's ServiceAccount write Leases.
const leaseNamespace = "book-controller-system"

// TestShards: --shards on this version's API server, whose alpha
// ShardedListAndWatch gate the control plane turns on as the tests' does.
// The controller's start-up checks prove that the API server filters lists
// by shard selector (they refuse to start otherwise); one replica holding
// both shards then makes every Book Ready, each ConfigMap labelled with its
// bucket, and holds both shard Leases.
func TestShards(t *testing.T) {
	ns := env.Namespace(t)
	kubeconfig := controllerKubeconfig(t)
	probe := framework.FreeAddr(t)
	p := framework.StartProcess(t, "book-controller", binary, "--kubeconfig", kubeconfig, "--namespace", ns,
		"--shards", "2", "--leader-elect", "--leader-elect-namespace", leaseNamespace, "--leader-elect-id", "compat-shards",
		"--health-probe-bind-address", probe)
	start := time.Now()
	framework.Eventually(t, "the sharded controller to pass its start-up checks and sync (/readyz)", framework.AnswersOK(probe, "/readyz"))
	t.Logf("ready after %v", time.Since(start).Round(time.Millisecond))

	const n = 6
	for i := range n {
		name := bookName(i)
		if _, err := env.Books.WebappV2().Books(ns).Create(context.Background(),
			framework.NewBook(ns, name, "Sharded "+name, int32(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		waitConverged(t, ns, bookName(i))
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), bookName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Labels["webapp.ydzs.io/shard-bucket"] == "" {
			t.Errorf("ConfigMap %s/%s has no shard-bucket label: %v", ns, cm.Name, cm.Labels)
		}
	}
	for i := range 2 {
		name := fmt.Sprintf("compat-shards-shard-%d", i)
		lease, err := env.Kube.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("shard Lease %s/%s: %v", leaseNamespace, name, err)
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h == "" {
			t.Errorf("shard Lease %s/%s has no holder", leaseNamespace, name)
		}
	}
	// A replica takes a second shard only once it has been free for a lease
	// duration (15 s), so half the Books wait that long.
	t.Logf("%d Books converged %v after the start", n, time.Since(start).Round(time.Millisecond))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("sharded controller after SIGTERM: exit code %d, %v; want 0", code, err)
	}
}
