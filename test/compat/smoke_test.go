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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

// books is how many Books the smoke creates: enough for the restart to sync
// a batch, few enough to stay a smoke.
const books = 20

// TestSmoke is a user's first day on the oldest supported Kubernetes: the
// controller binary with its default flags (only its serving addresses are
// moved to free loopback ports), as the manifests' ServiceAccount, through
// create, edit, tamper, delete and restart. Each step states the world it
// must leave: Books Ready for their generation, ConfigMaps holding their
// Book's spec, the garbage collector of that version deleting a deleted
// Book's ConfigMap, and a restart over converged Books writing nothing.
func TestSmoke(t *testing.T) {
	checkServerVersion(t)
	ns := env.Namespace(t)
	kubeconfig := controllerKubeconfig(t)
	ctrl := startController(t, kubeconfig)

	step(t, "create: every Book Ready for its generation, its ConfigMap holding its spec", func(t *testing.T) {
		for i := range books {
			name := bookName(i)
			if _, err := env.Books.WebappV2().Books(ns).Create(context.Background(),
				framework.NewBook(ns, name, "Title "+name, int32(i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range books {
			waitConverged(t, ns, bookName(i))
		}
	})

	step(t, "edit: a spec change reaches the ConfigMap", func(t *testing.T) {
		name := bookName(0)
		book, err := env.Books.WebappV2().Books(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		book.Spec.Title, book.Spec.Price = "Edited on Kubernetes "+kubernetes, webappv2.WholePrice(4242)
		if _, err := env.Books.WebappV2().Books(ns).Update(context.Background(), book, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if b := waitConverged(t, ns, name); b.Generation < 2 || b.Spec.Price.WholeUnits() != 4242 {
			t.Errorf("after the edit: %s, spec %+v; want generation 2 or more and price 4242", framework.DescribeBook(b), b.Spec)
		}
	})

	step(t, "tamper: an edited ConfigMap is repaired", func(t *testing.T) {
		name := bookName(1)
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["price"] = "999999"
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, ns, name)
	})

	step(t, "tamper: a deleted ConfigMap is recreated", func(t *testing.T) {
		name := bookName(2)
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForConfigMap(t, ns, name, "recreated (a new UID)", func(c *corev1.ConfigMap) bool { return c.UID != cm.UID })
		waitConverged(t, ns, name)
	})

	step(t, "delete: the garbage collector deletes a deleted Book's ConfigMap", func(t *testing.T) {
		name := bookName(3)
		if err := env.Books.WebappV2().Books(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForConfigMapGone(t, ns, name)
	})

	step(t, "restart over converged Books: no write, no resourceVersion moved", func(t *testing.T) {
		for i := range books {
			if i != 3 {
				waitConverged(t, ns, bookName(i))
			}
		}
		stopController(t, ctrl)
		before := resourceVersions(t, ns)
		restartedAt := time.Now()
		restarted := startController(t, kubeconfig)
		framework.Eventually(t, "the restarted controller to sync every Book", func(context.Context) error {
			synced, err := syncs(restarted.metrics)
			return poll.Done(err == nil && synced >= books-1, "%v successful syncs (%v)", synced, err)
		})
		framework.Eventually(t, "the restarted controller to go idle (no sync for 3 s)", poll.Unchanged(3*time.Second, func() float64 {
			synced, _ := syncs(restarted.metrics)
			return synced
		}))
		var written []string
		for _, w := range framework.ControllerWrites(env.AuditLog(t), ns) {
			if w.At.After(restartedAt) {
				written = append(written, w.String())
			}
		}
		if len(written) > 0 {
			t.Errorf("the audit log shows %d writes after the restart, want none:\n%s", len(written), strings.Join(written, "\n"))
		}
		after := resourceVersions(t, ns)
		for obj, rv := range before {
			if after[obj] != rv {
				t.Errorf("%s: resourceVersion %s before the restart, %q after", obj, rv, after[obj])
			}
		}
		if len(after) != len(before) {
			t.Errorf("%d objects before the restart, %d after", len(before), len(after))
		}
		stopController(t, restarted)
	})
	logStreamingLists(t)
}

// step runs one step of the smoke; a failed step ends the test, since the
// next ones build on its world.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

func bookName(i int) string { return fmt.Sprintf("book-%02d", i) }

// checkServerVersion makes sure the smoke runs on the version it claims to:
// the API server's /version, not the directory the binaries came from.
func checkServerVersion(t *testing.T) {
	t.Helper()
	v, err := env.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Major + "." + strings.TrimSuffix(v.Minor, "+"); got != kubernetes {
		t.Fatalf("the API server is %s (%s), want Kubernetes %s", got, v.GitVersion, kubernetes)
	}
	t.Logf("kube-apiserver %s, kube-controller-manager from %s", v.GitVersion, env.Cluster.BinDir())
}

// controllerKubeconfig is the admin kubeconfig acting as the manifests'
// ServiceAccount, with their RBAC applied: the controller's rights in a
// cluster, so the smoke also proves the ClusterRole enough on this version.
func controllerKubeconfig(t *testing.T) string {
	t.Helper()
	as := env.ControllerServiceAccountConfig(t).Impersonate
	return env.EditedKubeconfig(t, t.TempDir(), "controller", func(cfg *clientcmdapi.Config) {
		for _, u := range cfg.AuthInfos {
			u.Impersonate, u.ImpersonateGroups = as.UserName, as.Groups
		}
	})
}

// controller is a running controller binary and its metrics address.
type controller struct {
	proc    *framework.Process
	metrics string
}

// startController runs the binary with its default flags but the serving
// addresses: the probes' default :8081 and the metrics on free loopback
// ports, so that it binds nothing beyond loopback and clashes with nothing
// else on the machine.
func startController(t *testing.T, kubeconfig string) *controller {
	t.Helper()
	metrics, probe := framework.FreeAddr(t), framework.FreeAddr(t)
	p := framework.StartProcess(t, "book-controller", binary, "--kubeconfig", kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probe)
	framework.Eventually(t, "the controller's caches to sync (/readyz)", framework.AnswersOK(probe, "/readyz"))
	return &controller{proc: p, metrics: metrics}
}

// stopController sends SIGTERM, as a rollout does, and expects a clean exit.
func stopController(t *testing.T, c *controller) {
	t.Helper()
	if err := c.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := c.proc.Wait(30 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("controller after SIGTERM: exit code %d, %v; want 0", code, err)
	}
}

// syncs is the controller's count of successful syncs.
func syncs(addr string) (float64, error) {
	families, err := framework.ScrapeMetrics(addr)
	if err != nil {
		return 0, err
	}
	return framework.MetricValue(families, "book_controller_reconcile_total", "result", "success")
}

// waitConverged waits until the Book is Ready for its generation and its
// ConfigMap holds its spec, is labelled and is controlled by it.
func waitConverged(t *testing.T, ns, name string) *webappv2.Book {
	t.Helper()
	book := env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
	env.WaitForConfigMap(t, ns, name, fmt.Sprintf("holding the spec %+v of Book UID %s", book.Spec, book.UID), func(cm *corev1.ConfigMap) bool {
		owner := metav1.GetControllerOf(cm)
		return cm.Data["title"] == book.Spec.Title && cm.Data["price"] == strconv.Itoa(int(book.Spec.Price.WholeUnits())) &&
			cm.Labels["app.kubernetes.io/managed-by"] == "book-controller" &&
			owner != nil && owner.UID == book.UID
	})
	return book
}

// resourceVersions are those of every Book and ConfigMap in ns.
func resourceVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	rvs := map[string]string{}
	bookList, err := env.Books.WebappV2().Books(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bookList.Items {
		rvs["Book "+b.Name] = b.ResourceVersion
	}
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		rvs["ConfigMap "+cm.Name] = cm.ResourceVersion
	}
	return rvs
}

// logStreamingLists says how the informers filled their caches on this
// version, from the API server's own counters: streaming lists (a watch
// with sendInitialEvents, apiserver_watch_list_duration_seconds) or, after
// client-go's fallback, plain LISTs. Both work; the figures are for the
// record (README, supported versions).
func logStreamingLists(t *testing.T) {
	t.Helper()
	body, err := env.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Logf("kube-apiserver /metrics: %v", err)
		return
	}
	families, err := framework.ParseMetrics(string(body))
	if err != nil {
		t.Logf("kube-apiserver /metrics: %v", err)
		return
	}
	for _, resource := range []string{"books", "configmaps"} {
		streamed, _ := framework.MetricValue(families, "apiserver_watch_list_duration_seconds", "resource", resource)
		lists, _ := framework.MetricValue(families, "apiserver_request_total", "resource", resource, "verb", "LIST")
		t.Logf("%s on Kubernetes %s: %v streaming lists, %v LISTs (the test's own included)", resource, kubernetes, streamed, lists)
	}
}
