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
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

// heldBy is somebody else's finalizer on the Book's ConfigMap.
const heldBy = "example.com/someone-elses"

// recreateBound is how soon after the held ConfigMap's last finalizer is
// removed the recreated Book's own ConfigMap must hold its spec, and the
// Book be Ready for its generation: one watch event, a create and a status
// write.
const recreateBound = 2 * time.Second

// TestRecreatedBookOnAQuietClusterWideController is issue 40 §7 as a user
// meets it, with the binary at its default flags (all namespaces):
//
//  1. a Book is created and becomes Ready;
//  2. somebody adds a finalizer to its ConfigMap;
//  3. the Book is deleted; a garbage collector that has just started (as
//     on a fresh cluster) asks for the ConfigMap's deletion, and the
//     finalizer holds it;
//  4. a Book of the same name is created with another title, and waits
//     (Ready=False ConfigMapOfEarlierBook) for 3 s with nothing else
//     happening;
//  5. the finalizer is removed, which deletes the held ConfigMap.
//
// The new Book's ConfigMap must then hold the new title, and the Book be
// Ready for its generation, within recreateBound of the removal. Only the
// ConfigMap's delete event can bring that about so soon: the controller's
// own recheck of such a Book comes after 30 s.
//
// The 8.6–10.2 s did not reproduce on 2026-12-05 (21 runs). Each
// run used a fresh hack/local-up.sh cluster, manifests/crd.yaml, the
// commit's binary at its default flags with -v=4, and kubectl for the
// steps. The controller logged "Created ConfigMap" 0.15–0.75 s after the
// removal's kubectl began, before that kubectl returned. The exception
// came 1.3 s after it began, 0.3 s after it returned, while a build
// loaded the machine. That held with the garbage
// collector at 37–41 s, at a person's pace (30–32 s), with the live view
// on and in a new namespace. Commits tried: 1dcd55e, b8d669c (main when
// the issue was filed), aa2e527, 3ee0d3e, 2fa8652, ffc7f34, 72c8016,
// 8ebe5c1, 0fb8228, e274f19 and 9eaf272. Only 2965dfd, the commit before
// 9eaf272, stalls. Its handler dropped the delete event of a ConfigMap
// that another UID owned, and the hold reported ConfigMapConflict, not
// the reason. The ConfigMap came with the 30 s recheck, 26.5 s
// after the removal. The rate-limiter guess has no code path: since
// 9eaf272 the owner is judged before the deletion, so an earlier Book's
// held ConfigMap is a condition with a recheck, never an error that
// backs off.
//
// Nor does `make demo` first explain it (12 runs, b8d669c and 62bc06e).
// The demo's controller (--ui-bind-address only) holds :8081, so a second
// one at default flags exits at once: "--health-probe-bind-address
// \":8081\": ... address already in use"; the demo's alone then made the
// ConfigMap in 0.2–0.3 s. Let in with
// --health-probe-bind-address=0, the two run unelected side by side; one
// creates the ConfigMap 0.2–0.7 s after the removal, and the other's status
// write meets a conflict and requeues. No AlreadyExists, no backoff. The
// demo's controller stopped before the -v=4 one starts: 0.3–0.6 s.
//
// Not parallel: it restarts kube-controller-manager, and its controller
// watches every namespace. Go runs a package's parallel tests only after
// every sequential one has returned, so no other test's controller writes
// meanwhile.
func TestRecreatedBookOnAQuietClusterWideController(t *testing.T) {
	ctx := context.Background()
	if err := framework.InstallCRD(ctx, env.Extensions); err != nil {
		t.Fatal(err)
	}
	// Quiet: the controller below watches every namespace, so it starts once
	// the Books of earlier tests, whose namespaces are being deleted, are gone.
	framework.Eventually(t, "no Books left by earlier tests", func(ctx context.Context) error {
		list, err := env.Books.WebappV2().Books(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		return poll.Done(len(list.Items) == 0, "%d Books, the first in namespace %s", len(list.Items), firstNamespace(list.Items))
	})
	ns := env.Namespace(t)
	books := env.Books.WebappV2().Books(ns)
	cms := env.Kube.CoreV1().ConfigMaps(ns)

	probeAddr := framework.FreeAddr(t)
	proc := framework.StartProcess(t, "book-controller", binary, "-kubeconfig", env.Cluster.KubeconfigPath(),
		"--health-probe-bind-address", probeAddr, "-v=4")
	framework.Eventually(t, "/readyz to answer 200 once caches sync", framework.AnswersOK(probeAddr, "/readyz"))

	// 1.
	if _, err := books.Create(ctx, framework.NewBook(ns, "again", "first", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "again", metav1.ConditionTrue, "ConfigMapReady")

	// 2. and 3., with the garbage collector stopped until the Book is gone
	// and then started afresh.
	if err := env.Cluster.KillControllerManager(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, running := env.Cluster.Pids()[localcluster.KubeControllerManager]; !running {
			if err := env.Cluster.StartControllerManager(context.Background()); err != nil {
				t.Errorf("restarting kube-controller-manager: %v", err)
			}
		}
	})
	changeFinalizers(t, ns, "again", func(f []string) []string { return append(f, heldBy) })
	t.Cleanup(func() {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			return removeFinalizer(context.Background(), ns, "again")
		}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing %s: %v", heldBy, err)
		}
	})
	if err := books.Delete(ctx, "again", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the first Book to be gone", func(ctx context.Context) error {
		_, err := books.Get(ctx, "again", metav1.GetOptions{})
		return poll.Done(apierrors.IsNotFound(err), "Get: %v", err)
	})
	if err := env.Cluster.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	held := env.WaitForConfigMap(t, ns, "again", "to be deleted by the garbage collector and held by "+heldBy,
		func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })

	// 4.
	second, err := books.Create(ctx, framework.NewBook(ns, "again", "second", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "again", metav1.ConditionFalse, "ConfigMapOfEarlierBook")
	time.Sleep(3 * time.Second) // the scenario's quiet wait, not a wait for a state
	if cm, err := cms.Get(ctx, "again", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if cm.UID != held.UID || cm.ResourceVersion != held.ResourceVersion {
		t.Fatalf("the earlier Book's ConfigMap was changed or replaced while held:\nbefore %+v\nafter  %+v", held, cm)
	}

	// 5.
	if err := removeFinalizer(ctx, ns, "again"); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			logTimeline(t, ns, "again", removed, proc)
		}
	})
	var cmAfter, readyAfter time.Duration
	poll.Eventually(t, fmt.Sprintf("the new Book's ConfigMap with its title, and the Book Ready (want within %v of the finalizer's removal)", recreateBound),
		20*time.Millisecond, framework.Timeout, func(ctx context.Context) error {
			if cmAfter == 0 {
				cm, err := cms.Get(ctx, "again", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if cm.UID == held.UID {
					return poll.Stop(fmt.Errorf("the held ConfigMap is still there after its last finalizer was removed: %+v", cm))
				}
				if !metav1.IsControlledBy(cm, second) || cm.Data["title"] != "second" || cm.Data["price"] != "2" {
					return fmt.Errorf("ConfigMap %s: data %v, owners %v", cm.UID, cm.Data, cm.OwnerReferences)
				}
				cmAfter = time.Since(removed)
			}
			b, err := books.Get(ctx, "again", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(b.Status.Conditions, "Ready")
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != b.Generation || b.UID != second.UID {
				return errors.New(framework.DescribeBook(b))
			}
			readyAfter = time.Since(removed)
			return nil
		})
	t.Logf("after the held ConfigMap's last finalizer was removed: the new Book's ConfigMap %v, Ready %v (bound %v)",
		cmAfter.Round(time.Millisecond), readyAfter.Round(time.Millisecond), recreateBound)
	if readyAfter > recreateBound {
		t.Errorf("the recreated Book took %v (ConfigMap %v) after the held ConfigMap's removal, want within %v",
			readyAfter.Round(time.Millisecond), cmAfter.Round(time.Millisecond), recreateBound)
	}
}

// firstNamespace is the namespace of the first of books, "" if none.
func firstNamespace(books []webappv2.Book) string {
	if len(books) == 0 {
		return ""
	}
	return books[0].Namespace
}

// changeFinalizers changes the finalizers of the ConfigMap ns/name.
func changeFinalizers(t *testing.T, ns, name string, change func([]string) []string) {
	t.Helper()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Finalizers = change(cm.Finalizers)
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("changing the finalizers of ConfigMap %s/%s: %v", ns, name, err)
	}
}

// removeFinalizer removes heldBy from the ConfigMap ns/name if it is there.
// The update that removes the last finalizer of an object being deleted
// deletes it before the API server answers.
func removeFinalizer(ctx context.Context, ns, name string) error {
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil || !slices.Contains(cm.Finalizers, heldBy) {
		return err
	}
	cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == heldBy })
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// logTimeline logs, relative to the finalizer's removal, every write of the
// Book and of its ConfigMap from the API server's audit log, and the
// controller's log lines about the Book: what a failure is explained from.
func logTimeline(t *testing.T, ns, name string, removed time.Time, proc *framework.Process) {
	t.Helper()
	for _, e := range env.AuditLog(t) {
		ref := e.ObjectRef
		if ref == nil || ref.Namespace != ns || ref.Name != name || (ref.Resource != "configmaps" && ref.Resource != "books") {
			continue
		}
		resource := ref.Resource
		if ref.Subresource != "" {
			resource += "/" + ref.Subresource
		}
		code := int32(0)
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		t.Logf("audit %+8.3fs %s %s (%d) by %s", e.RequestReceivedTimestamp.Sub(removed).Seconds(), e.Verb, resource, code, e.User.Username)
	}
	for _, l := range proc.Lines() {
		if strings.Contains(l.Text, ns+"/"+name) {
			t.Logf("log   %+8.3fs %s", l.At.Sub(removed).Seconds(), l.Text)
		}
	}
}
