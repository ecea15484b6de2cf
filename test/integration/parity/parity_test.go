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

package parity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard"
	"ydzs.io/book-controller/test/integration/framework"
)

const (
	managedByLabel = "app.kubernetes.io/managed-by"
	bookLabel      = "webapp.ydzs.io/book"
	crdHint        = "kubectl apply -f manifests/crd.yaml"
)

// impl is one of the controllers under comparison.
type impl struct {
	name string
	bin  string
	// args are the flags for a run restricted to ns ("" for all), serving
	// health probes and metrics on the given addresses ("0": off).
	args func(ns string, a addrs) []string
	// reconciles is the counter of reconciles by result, in its metrics.
	reconciles string
}

// addrs are where a controller serves its endpoints.
type addrs struct{ probe, metrics string }

var off = addrs{probe: "0", metrics: "0"}

// recheck is the recheck of a Book in conflict, 30 s by default in both,
// shorter to keep the test quick, and the same for all: every scenario that
// shows a Book leaving something alone waits for rechecks (waitSyncs).
var recheck = []string{"--conflict-recheck", "2s"}

// impls are the controllers under comparison. Every flag is given to each
// as it is: a binary that does not know one exits, and the test fails.
func impls() []impl {
	kubeconfig := env.Cluster.KubeconfigPath()
	return []impl{
		{
			name: "book-controller",
			bin:  ours,
			args: func(ns string, a addrs) []string {
				// Free ports for probes and metrics: the defaults (kubebuilder's
				// :8081 among them) can't be shared by concurrent runs.
				args := []string{"--kubeconfig", kubeconfig, "--namespace", ns, "--workers", "2",
					"--health-probe-bind-address", a.probe, "--metrics-bind-address", a.metrics}
				// The twin neither serves a conversion webhook nor migrates
				// storage: the test environment serves the webhook apart.
				args = append(args, "--webhook-bind-address=0", "--storage-migration=false") // fork:line v2
				return append(args, recheck...)
			},
			reconciles: "book_controller_reconcile_total",
		},
		{
			name: "controller-runtime",
			bin:  twin,
			args: func(ns string, a addrs) []string {
				// Plain HTTP metrics, so the test can scrape without a token.
				return append([]string{"--kubeconfig", kubeconfig, "--namespace", ns, "--max-concurrent-reconciles", "2",
					"--health-probe-bind-address", a.probe, "--metrics-bind-address", a.metrics, "--metrics-secure=false"},
					recheck...)
			},
			reconciles: "controller_runtime_reconcile_total",
		},
		{
			// The bench's twin-tuned: it must be the same controller, only
			// faster. Its label-filtered ConfigMap cache is what the
			// stripped-labels and foreign-ConfigMap scenarios probe.
			name: "controller-runtime tuned",
			bin:  twin,
			args: func(ns string, a addrs) []string {
				args := []string{"--kubeconfig", kubeconfig, "--namespace", ns, "--max-concurrent-reconciles", "2",
					"--health-probe-bind-address", a.probe, "--metrics-bind-address", a.metrics, "--metrics-secure=false"}
				args = append(args, framework.TwinTunedArgs("10", "25")...)
				return append(args, recheck...)
			},
			reconciles: "controller_runtime_reconcile_total",
		},
	}
}

// TestParity first starts both binaries on a cluster without the Book CRD,
// then installs it and runs the same scenarios against each controller in
// a namespace of its own, concurrently, and compares the final states.
func TestParity(t *testing.T) {
	all := impls()

	t.Run("CRD missing", func(t *testing.T) {
		for _, im := range all {
			t.Run(im.name, func(t *testing.T) {
				out, code := framework.RunToExit(t, time.Minute, im.name, im.bin, im.args("", off)...)
				if code == 0 {
					t.Fatalf("exit code 0 without the CRD, want non-zero; output:\n%s", out)
				}
				for _, want := range []string{"is not installed", crdHint} {
					if !strings.Contains(out, want) {
						t.Errorf("output does not mention %q:\n%s", want, out)
					}
				}
				t.Logf("exit code %d, %d line(s) of output; first: %s", code, strings.Count(strings.TrimSpace(out), "\n")+1, firstLine(out, "not installed"))
			})
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.InstallCRDBeforeGC(ctx); err != nil {
		t.Fatal(err)
	}
	compare(t, all)
}

// compare runs the scenarios against every controller concurrently, each
// in a namespace of its own, and compares the final states.
func compare(t *testing.T, all []impl) {
	t.Helper()
	var mu sync.Mutex
	states := map[string]map[string]bookState{}
	t.Run("scenarios", func(t *testing.T) {
		for _, im := range all {
			t.Run(im.name, func(t *testing.T) {
				t.Parallel()
				s := scenarios(t, im)
				mu.Lock()
				states[im.name] = s
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}

	t.Run("final states match", func(t *testing.T) {
		a := states[all[0].name]
		for _, other := range all[1:] {
			b := states[other.name]
			for _, name := range slices.Sorted(maps.Keys(a)) {
				ja, jb := mustJSON(a[name]), mustJSON(b[name])
				if ja != jb {
					t.Errorf("Book %s differs\n%s:\n%s\n%s:\n%s", name, all[0].name, ja, other.name, jb)
				} else {
					t.Logf("Book %s: identical in %s and %s\n%s", name, all[0].name, other.name, ja)
				}
			}
			if len(a) != len(b) {
				t.Errorf("different Books: %v vs %v", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
			}
		}
	})
}

// scenarios drives one controller through create, spec update, repair,
// conflict, the ConfigMap of an earlier Book of the same name, and garbage
// collection, and returns the state of every Book before the first one's
// deletion, and of the Books that waited for an earlier Book's ConfigMap
// while they waited.
func scenarios(t *testing.T, im impl) map[string]bookState {
	ctx := context.Background()
	ns := env.Namespace(t)
	proc := startController(t, im, ns)
	books := env.Books.WebappV2().Books(ns)
	cms := env.Kube.CoreV1().ConfigMaps(ns)

	holds := func(title string, price int32) func(*corev1.ConfigMap) bool {
		return func(cm *corev1.ConfigMap) bool {
			return len(cm.Data) == 2 && cm.Data["title"] == title && cm.Data["price"] == fmt.Sprint(price) &&
				len(cm.BinaryData) == 0 &&
				cm.Labels[managedByLabel] == "book-controller" && cm.Labels[bookLabel] == cm.Name
		}
	}

	// Create → Ready, ConfigMap, ConfigMapCreated.
	if _, err := books.Create(ctx, framework.NewBook(ns, "book-a", "kubernetes", 100), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "book-a", metav1.ConditionTrue, "ConfigMapReady")
	env.WaitForConfigMap(t, ns, "book-a", "to hold the spec", holds("kubernetes", 100))
	env.WaitForEvent(t, ns, "book-a", corev1.EventTypeNormal, "ConfigMapCreated")

	// Spec update → generation 2 observed, ConfigMap updated.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := books.Get(ctx, "book-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Spec.Title, b.Spec.Price = "kubernetes in action", webappv2.WholePrice(120)
		_, err = books.Update(ctx, b, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b := env.WaitForReady(t, ns, "book-a", metav1.ConditionTrue, "ConfigMapReady")
	if b.Generation != 2 || b.Status.ObservedGeneration != 2 {
		t.Errorf("after one spec update: generation %d, observedGeneration %d, want 2 and 2", b.Generation, b.Status.ObservedGeneration)
	}
	env.WaitForConfigMap(t, ns, "book-a", "to hold the updated spec", holds("kubernetes in action", 120))
	env.WaitForEvent(t, ns, "book-a", corev1.EventTypeNormal, "ConfigMapUpdated")

	// ConfigMap edited → restored, with a label someone else added kept.
	updateConfigMap(t, ns, "book-a", func(cm *corev1.ConfigMap) {
		cm.Data = map[string]string{"title": "vandalised", "extra": "x"}
		cm.Labels["team"] = "someone-else"
	})
	cm := env.WaitForConfigMap(t, ns, "book-a", "restored after an edit", holds("kubernetes in action", 120))
	if cm.Labels["team"] != "someone-else" {
		t.Errorf("a label added by someone else was removed: %v", cm.Labels)
	}

	// Labels stripped (it leaves a label-filtered cache) → restored.
	updateConfigMap(t, ns, "book-a", func(cm *corev1.ConfigMap) {
		cm.Labels = nil
		cm.Data["price"] = "8"
	})
	env.WaitForConfigMap(t, ns, "book-a", "restored after its labels were removed", holds("kubernetes in action", 120))

	// Deleted → recreated.
	old, err := cms.Get(ctx, "book-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "book-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMap(t, ns, "book-a", "recreated after deletion", func(cm *corev1.ConfigMap) bool {
		return cm.UID != old.UID && holds("kubernetes in action", 120)(cm)
	})

	// A foreign ConfigMap takes the name → left alone, Ready=False
	// ConfigMapConflict, one Warning; once it is deleted the Book converges.
	foreign, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "book-b", Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Data:       map[string]string{"title": "not yours", "config": "important"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := books.Create(ctx, framework.NewBook(ns, "book-b", "mine", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "book-b", metav1.ConditionFalse, "ConfigMapConflict")
	env.WaitForEvent(t, ns, "book-b", corev1.EventTypeWarning, "ConfigMapConflict")
	// Rechecks of the Book in conflict that saw the foreign ConfigMap.
	waitSyncs(t, im, proc)
	after, err := cms.Get(ctx, "book-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != foreign.ResourceVersion || !maps.Equal(after.Data, foreign.Data) ||
		!maps.Equal(after.Labels, foreign.Labels) || len(after.OwnerReferences) != 0 {
		t.Errorf("foreign ConfigMap was modified:\nbefore %+v\nafter  %+v", foreign, after)
	}
	freed := time.Now()
	if err := cms.Delete(ctx, "book-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "book-b", metav1.ConditionTrue, "ConfigMapReady")
	t.Logf("Book converged %v after the foreign ConfigMap was deleted", time.Since(freed).Round(100*time.Millisecond))
	env.WaitForConfigMap(t, ns, "book-b", "to be the Book's", holds("mine", 3))
	env.WaitForEvent(t, ns, "book-b", corev1.EventTypeNormal, "ConfigMapCreated")
	if n := countEvents(t, ns, "book-b", corev1.EventTypeWarning, "ConfigMapConflict"); n != 1 {
		t.Errorf("%d ConfigMapConflict warnings for one conflict episode, want 1", n)
	}

	// A ConfigMap controlled by an earlier Book of the same name, which the
	// garbage collector is about to delete → left alone, Ready=False
	// ConfigMapOfEarlierBook, no Warning; once it is gone the Book
	// converges. A finalizer of the test's holds the ConfigMap until its
	// state is recorded, so that no implementation can miss the moment.
	// First with an owner reference forged with a UID no Book ever had:
	waiting := map[string]bookState{}
	forged, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "book-c", Namespace: ns, Finalizers: []string{holdFinalizer},
			Labels: map[string]string{managedByLabel: "book-controller", bookLabel: "book-c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "webapp.ydzs.io/v2", Kind: "Book", Name: "book-c",
				UID: uuid.NewUUID(), Controller: ptr.To(true)}}},
		Data: map[string]string{"title": "forged", "price": "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := books.Create(ctx, framework.NewBook(ns, "book-c", "after a forgery", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting["book-c waiting"] = awaitEarlierBooksConfigMap(t, im, proc, ns, "book-c", forged, holds("after a forgery", 4))

	// Then the real case: a Book deleted and created again before the
	// garbage collector has removed its first ConfigMap.
	if _, err := books.Create(ctx, framework.NewBook(ns, "book-d", "first", 5), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "book-d", metav1.ConditionTrue, "ConfigMapReady")
	updateConfigMap(t, ns, "book-d", func(cm *corev1.ConfigMap) { cm.Finalizers = append(cm.Finalizers, holdFinalizer) })
	if err := books.Delete(ctx, "book-d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	earlier := env.WaitForConfigMap(t, ns, "book-d", "to be deleted by the garbage collector, held by "+holdFinalizer,
		func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })
	framework.Eventually(t, "the first Book book-d to be gone", func(ctx context.Context) error {
		b, err := books.Get(ctx, "book-d", metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("Book %s exists, deletionTimestamp %v", b.UID, b.DeletionTimestamp)
		}
		return poll.Done(apierrors.IsNotFound(err), "%v", err)
	})
	if _, err := books.Create(ctx, framework.NewBook(ns, "book-d", "second", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting["book-d waiting"] = awaitEarlierBooksConfigMap(t, im, proc, ns, "book-d", earlier, holds("second", 6))

	// The second book-d's ConfigMapCreated is the last Event of all: each
	// binary sends its Events one after the other, in order, so once it is
	// in, every Event the snapshot records is.
	d, err := books.Get(ctx, "book-d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForEventAbout(t, ns, d, corev1.EventTypeNormal, "ConfigMapCreated")
	state := map[string]bookState{}
	for _, name := range []string{"book-a", "book-b", "book-c", "book-d"} {
		state[name] = snapshot(t, ns, name)
	}

	// Restart over converged Books → no writes: the new process lists
	// everything, reconciles everything, and changes nothing: not even a
	// no-op write may be sent (client-go's request counter), and no
	// object's resourceVersion may move. Writes made while syncing are sent
	// before the sync is counted. A new Book, once its ConfigMapCreated
	// Event is in, is the marker for the Events, which are sent in the
	// background, in order.
	checkProbes(t, proc.addrs.probe)
	if err := proc.stop(); err != nil {
		t.Errorf("%s after SIGTERM: %v", im.name, err)
	}
	before := resourceVersions(t, ns)
	proc = startController(t, im, ns)
	framework.Eventually(t, im.name+" to be ready after a restart", framework.AnswersOK(proc.addrs.probe, "/readyz"))
	// controller-runtime starts its metrics server beside the probes, not
	// before them: ready does not mean it answers yet.
	framework.Eventually(t, im.name+"'s metrics to answer after a restart", framework.AnswersOK(proc.addrs.metrics, "/metrics"))
	framework.Eventually(t, fmt.Sprintf("the restarted %s to sync the %d Books", im.name, len(state)), func(context.Context) error {
		n := successfulReconciles(t, proc.addrs.metrics, im.reconciles)
		return poll.Done(n >= float64(len(state)), "%v successful reconciles", n)
	})
	reqs := requestsByMethod(t, proc.addrs.metrics)
	t.Logf("API requests after a restart over converged Books: %v", reqs)
	if w := reqs["POST"] + reqs["PUT"] + reqs["PATCH"] + reqs["DELETE"]; w != 0 {
		t.Errorf("%v write requests after a restart over converged Books, want 0 (%v)", w, reqs)
	}
	marker, err := books.Create(ctx, framework.NewBook(ns, "book-e", "after the restart", 7), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForEventAbout(t, ns, marker, corev1.EventTypeNormal, "ConfigMapCreated")
	restarted := resourceVersions(t, ns)
	for k := range restarted {
		if strings.HasPrefix(k, "book/book-e") || strings.HasPrefix(k, "configmap/book-e") || strings.HasPrefix(k, "event/book-e.") {
			delete(restarted, k)
		}
	}
	if !maps.Equal(before, restarted) {
		t.Errorf("a restart over converged Books wrote to the cluster:\nbefore %v\nafter  %v", before, restarted)
	}

	// Book deleted → its ConfigMap is garbage-collected.
	if err := books.Delete(ctx, "book-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMapGone(t, ns, "book-a")

	checkProbes(t, proc.addrs.probe)
	if err := proc.stop(); err != nil {
		t.Errorf("%s after SIGTERM: %v", im.name, err)
	}
	maps.Copy(state, waiting)
	return state
}

// holdFinalizer keeps a ConfigMap that the garbage collector deletes until
// the test has seen what the controller reports meanwhile.
const holdFinalizer = "parity.test.ydzs.io/hold"

// awaitEarlierBooksConfigMap: the Book name in ns finds held, a ConfigMap
// controlled by an earlier Book of its name and kept by holdFinalizer. The
// Book must report Ready=False ConfigMapOfEarlierBook and leave held alone,
// with no Warning, also in rechecks (waitSyncs); once held is deleted, the
// Book must create its own
// ConfigMap, which holds passes, and be Ready. It returns the Book's state
// while it waited.
func awaitEarlierBooksConfigMap(t *testing.T, im impl, proc *running, ns, name string, held *corev1.ConfigMap, holds func(*corev1.ConfigMap) bool) bookState {
	t.Helper()
	ctx := context.Background()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	env.WaitForReady(t, ns, name, metav1.ConditionFalse, "ConfigMapOfEarlierBook")
	// Rechecks of the Book that saw the earlier Book's ConfigMap.
	waitSyncs(t, im, proc)
	now, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != held.UID || !maps.Equal(now.Data, held.Data) || !maps.Equal(now.Labels, held.Labels) ||
		!equality.Semantic.DeepEqual(now.OwnerReferences, held.OwnerReferences) {
		t.Errorf("the earlier Book's ConfigMap was modified:\nbefore %+v\nafter  %+v", held, now)
	}
	state := snapshot(t, ns, name)

	// As the garbage collector does (it has already, for a real earlier
	// Book's ConfigMap), then the hold goes.
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	freed := time.Now()
	updateConfigMap(t, ns, name, func(cm *corev1.ConfigMap) {
		cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == holdFinalizer })
	})
	env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
	t.Logf("Book %s converged %v after the earlier Book's ConfigMap was released", name, time.Since(freed).Round(100*time.Millisecond))
	env.WaitForConfigMap(t, ns, name, "to be the new Book's", holds)
	if w := warnings(t, ns, name); len(w) != 0 {
		t.Errorf("Warning events about Book %s, whose ConfigMap was an earlier Book's: %v", name, w)
	}
	return state
}

// warnings lists the Warning events about the Book name.
func warnings(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, ev := range bookEvents(t, ns, name) {
		if ev.Type == corev1.EventTypeWarning {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return out
}

// resourceVersions maps every Book, ConfigMap and Event in ns to its
// resourceVersion (an Event's series count is part of its object).
func resourceVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	rvs := map[string]string{}
	books, err := env.Books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range books.Items {
		rvs["book/"+b.Name] = b.ResourceVersion
	}
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			rvs["configmap/"+cm.Name] = cm.ResourceVersion
		}
	}
	evs, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		rvs["event/"+ev.Name] = ev.ResourceVersion
	}
	return rvs
}

// requestsByMethod scrapes rest_client_requests_total from a metrics
// endpoint and sums it by HTTP method.
func requestsByMethod(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out := framework.MetricSumBy(framework.Scrape(t, addr), "rest_client_requests_total", "method")
	if len(out) == 0 {
		t.Fatalf("no rest_client_requests_total samples at %s/metrics", addr)
	}
	return out
}

// successfulReconciles sums the samples of the counter name with
// result="success" at a metrics endpoint.
func successfulReconciles(t *testing.T, addr, name string) float64 {
	t.Helper()
	v, err := framework.MetricValue(framework.Scrape(t, addr), name, "result", "success")
	if err != nil {
		t.Fatalf("%v at %s/metrics: set impl.reconciles to the binary's reconcile counter", err, addr)
	}
	return v
}

func checkProbes(t *testing.T, addr string) {
	t.Helper()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, err := framework.HTTPGet(addr, path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s%s: %d (%v), want 200", addr, path, code, err)
		}
	}
}

// bookState is what the comparison looks at, stripped of anything that
// legitimately differs between runs (UIDs, times, resourceVersions).
type bookState struct {
	Status    statusState
	ConfigMap *cmState
	// Events are "Type Reason: note" of the events.k8s.io Events about the Book.
	Events []string
}

type statusState struct {
	ObservedGeneration int64
	ConfigMapName      string
	Conditions         []conditionState
}

type conditionState struct {
	Type, Status, Reason, Message string
	ObservedGeneration            int64
}

type cmState struct {
	Data   map[string]string
	Labels map[string]string
	Owners []ownerState
}

type ownerState struct {
	APIVersion, Kind, Name         string
	UIDIsBooks                     bool
	Controller, BlockOwnerDeletion bool
}

// uidRE matches a UID, which the state compared leaves out.
var uidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func snapshot(t *testing.T, ns, name string) bookState {
	t.Helper()
	ctx := context.Background()
	book, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := bookState{Status: statusState{
		ObservedGeneration: book.Status.ObservedGeneration,
		ConfigMapName:      book.Status.ConfigMapName,
	}}
	for _, c := range book.Status.Conditions {
		s.Status.Conditions = append(s.Status.Conditions, conditionState{
			Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: uidRE.ReplaceAllString(c.Message, "<uid>"),
			ObservedGeneration: c.ObservedGeneration,
		})
	}
	if cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		// The shard-bucket label is book-controller's own: it shards, the
		// twin does not. On a ConfigMap the Book controls it must be the
		// Book's bucket (an earlier Book's carries that Book's); it is left
		// out of what the implementations are compared on.
		labels := maps.Clone(cm.Labels)
		ref := metav1.GetControllerOf(cm)
		if b, ok := labels[shard.BucketLabel]; ok && ref != nil && ref.UID == book.UID {
			if want := shard.BucketName(shard.BucketOf(book.UID)); b != want {
				t.Errorf("ConfigMap %s/%s: %s %q, want %q (the bucket of its Book's UID)", ns, name, shard.BucketLabel, b, want)
			}
		}
		delete(labels, shard.BucketLabel)
		s.ConfigMap = &cmState{Data: cm.Data, Labels: labels}
		for _, ref := range cm.OwnerReferences {
			s.ConfigMap.Owners = append(s.ConfigMap.Owners, ownerState{
				APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UIDIsBooks: ref.UID == book.UID,
				Controller: ref.Controller != nil && *ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion,
			})
		}
	}
	seen := map[string]bool{}
	for _, ev := range bookEvents(t, ns, name) {
		seen[fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Note)] = true
	}
	s.Events = slices.Sorted(maps.Keys(seen))
	// The reporting controller is part of what users filter on.
	for _, ev := range bookEvents(t, ns, name) {
		if ev.ReportingController != "webapp.ydzs.io/book-controller" {
			t.Errorf("event %s about Book %s reported by %q, want webapp.ydzs.io/book-controller", ev.Reason, name, ev.ReportingController)
		}
	}
	if c := meta.FindStatusCondition(book.Status.Conditions, "Ready"); c == nil {
		t.Errorf("Book %s has no Ready condition", name)
	}
	return s
}

func bookEvents(t *testing.T, ns, name string) []eventSummary {
	t.Helper()
	list, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventSummary
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "Book" || ev.Regarding.Name != name {
			continue
		}
		n := int32(1)
		if ev.Series != nil {
			n = ev.Series.Count
		}
		out = append(out, eventSummary{Type: ev.Type, Reason: ev.Reason, Note: ev.Note, Count: n, ReportingController: ev.ReportingController})
	}
	return out
}

type eventSummary struct {
	Type, Reason, Note, ReportingController string
	Count                                   int32
}

// countEvents counts occurrences (series included) of one kind of event.
func countEvents(t *testing.T, ns, name, eventType, reason string) int {
	t.Helper()
	n := 0
	for _, ev := range bookEvents(t, ns, name) {
		if ev.Type == eventType && ev.Reason == reason {
			n += int(ev.Count)
		}
	}
	return n
}

func updateConfigMap(t *testing.T, ns, name string, mutate func(*corev1.ConfigMap)) {
	t.Helper()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		mutate(cm)
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// running is a controller process started by startController.
type running struct {
	*framework.Process
	addrs addrs
}

// startController runs the binary restricted to ns until stop or the end of
// the test; the end of its output is logged when the test fails, all of it
// when BOOK_PARITY_LOG is set.
func startController(t *testing.T, im impl, ns string) *running {
	t.Helper()
	r := &running{addrs: addrs{probe: framework.FreeAddr(t), metrics: framework.FreeAddr(t)}}
	r.Process = framework.StartProcess(t, im.name, im.bin, im.args(ns, r.addrs)...)
	if os.Getenv("BOOK_PARITY_LOG") != "" {
		t.Cleanup(func() { t.Logf("%s output:\n%s", im.name, r.Output()) })
	}
	return r
}

// stop sends SIGTERM and waits for a clean exit.
func (r *running) stop() error {
	if err := r.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	code, err := r.Wait(30 * time.Second)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit code %d", code)
	}
	return err
}

func firstLine(out, containing string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, containing) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// waitSyncs waits until the controller has reconciled twice more, of any
// result, than when it is called: at least one reconcile then began after
// the state the test has just seen was written (the one being counted may
// be the one that wrote it). A check that the controller left something
// alone comes after it. With no other Book changing, these are rechecks.
func waitSyncs(t *testing.T, im impl, proc *running) {
	t.Helper()
	// A scrape that fails (a process the shared machine stalled past the
	// HTTP client's timeout) is retried within the wait's bound.
	total := func() (float64, error) {
		families, err := framework.ScrapeMetrics(proc.addrs.metrics)
		if err != nil {
			return 0, err
		}
		return framework.MetricValue(families, im.reconciles)
	}
	var base float64
	framework.Eventually(t, im.name+"'s reconcile count", func(context.Context) error {
		var err error
		base, err = total()
		return err
	})
	framework.Eventually(t, im.name+" to reconcile twice more", func(context.Context) error {
		n, err := total()
		if err != nil {
			return err
		}
		return poll.Done(n-base >= 2, "%v more reconciles", n-base)
	})
}

// waitForEventAbout waits for an Event of the given type and reason about
// this Book (its UID: an earlier Book of the same name had Events too).
func waitForEventAbout(t *testing.T, ns string, book *webappv2.Book, eventType, reason string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("%s event %s about Book %s (UID %s)", eventType, reason, book.Name, book.UID), func(ctx context.Context) error {
		list, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == book.UID && ev.Type == eventType && ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(list.Items))
	})
}
