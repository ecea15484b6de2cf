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

package deploy_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/test/integration/framework"
)

// leaderElection is leader election on a Lease of the test's own, in the
// controller's namespace as in the Deployment, with short timings.
func leaderElection(t *testing.T) manager.LeaderElection {
	return manager.LeaderElection{
		Enabled:       true,
		Namespace:     controllerNamespace,
		ID:            fmt.Sprintf("deploy-test-%d", time.Now().UnixNano()),
		LeaseDuration: 4 * time.Second,
		RenewDeadline: 3 * time.Second,
		RetryPeriod:   500 * time.Millisecond,
	}
}

// TestControllerConvergesAsServiceAccount runs the controller, with leader
// election as the Deployment does, on the ServiceAccount's credentials and
// drives it through every write it makes: create ConfigMap, status update,
// events, repair (update), and a foreign ConfigMap (AlreadyExists, then a
// live GET). The API server must never have answered it 403.
func TestControllerConvergesAsServiceAccount(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	denied := newDeniedRecorder(t)
	le := leaderElection(t)
	rc := env.StartController(t, framework.ControllerOptions{
		Namespace:      ns,
		RESTConfig:     denied.Wrap(env.ControllerServiceAccountConfig(t)),
		LeaderElection: le,
	})

	books := env.Books.WebappV2().Books(ns)
	if _, err := books.Create(ctx, framework.NewBook(ns, "book-sample", "kubernetes", 100), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "book-sample", metav1.ConditionTrue, controller.ReasonConfigMapReady)
	env.WaitForConfigMap(t, ns, "book-sample", "with the Book's data", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "kubernetes" && cm.Data["price"] == "100"
	})
	env.WaitForEvent(t, ns, "book-sample", corev1.EventTypeNormal, controller.EventConfigMapCreated)

	lease, err := env.Kube.CoordinationV1().Leases(le.Namespace).Get(ctx, le.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the controller holds no Lease %s/%s: %v", le.Namespace, le.ID, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("Lease %s/%s has no holder", le.Namespace, le.ID)
	}

	// Repair: an edited ConfigMap is updated back.
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "book-sample", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["title"] = "edited by hand"
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForConfigMap(t, ns, "book-sample", "repaired", func(cm *corev1.ConfigMap) bool {
		return cm.Data["title"] == "kubernetes"
	})
	env.WaitForEvent(t, ns, "book-sample", corev1.EventTypeNormal, controller.EventConfigMapUpdated)

	// A ConfigMap someone else owns: create fails with AlreadyExists, the
	// controller reads it live and reports the conflict.
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Data: map[string]string{"a": "b"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := books.Create(ctx, framework.NewBook(ns, "taken", "conflict", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "taken", metav1.ConditionFalse, controller.ReasonConfigMapConflict)
	env.WaitForEvent(t, ns, "taken", corev1.EventTypeWarning, controller.EventConfigMapConflict)

	if err := rc.Stop(); err != nil {
		t.Errorf("controller: %v", err)
	}
	// ReleaseOnCancel: the Lease was given up on the way out (an update).
	lease, err = env.Kube.CoordinationV1().Leases(le.Namespace).Get(ctx, le.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease still held by %q after the controller stopped", *h)
	}
}

// TestServiceAccountCannotWriteOutsideItsRole: with the controller's
// credentials, everything the code does not do is forbidden.
func TestServiceAccountCannotWriteOutsideItsRole(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := env.ControllerServiceAccountConfig(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	bookClient := versioned.NewForConfigOrDie(cfg)

	// Objects to aim at, made by the admin.
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	book, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "b", "title", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, StringData: map[string]string{"k": "v"}}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mergePatch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)

	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"delete a ConfigMap", func() error {
			return kube.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{})
		}},
		{"deletecollection ConfigMaps", func() error {
			return kube.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}},
		{"patch a ConfigMap", func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, cm.Name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
			return err
		}},
		{"create a Secret", func() error {
			_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
			return err
		}},
		{"read a Secret", func() error {
			_, err := kube.CoreV1().Secrets(ns).Get(ctx, secret.Name, metav1.GetOptions{})
			return err
		}},
		{"list Secrets", func() error {
			_, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a Pod", func() error {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			_, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err
		}},
		{"create a Book", func() error {
			_, err := bookClient.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "mine", "t", 1), metav1.CreateOptions{})
			return err
		}},
		{"update a Book's spec", func() error {
			b := book.DeepCopy()
			b.Spec.Price = webappv2.WholePrice(2)
			_, err := bookClient.WebappV2().Books(ns).Update(ctx, b, metav1.UpdateOptions{})
			return err
		}},
		{"patch a Book", func() error {
			_, err := bookClient.WebappV2().Books(ns).Patch(ctx, book.Name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
			return err
		}},
		{"patch a Book's status", func() error {
			_, err := bookClient.WebappV2().Books(ns).Patch(ctx, book.Name, types.MergePatchType,
				[]byte(`{"status":{"configMapName":"x"}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"delete a Book", func() error {
			return bookClient.WebappV2().Books(ns).Delete(ctx, book.Name, metav1.DeleteOptions{})
		}},
		{"create a core/v1 Event", func() error {
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}, InvolvedObject: corev1.ObjectReference{Kind: "Book", Name: "b", Namespace: ns}}
			_, err := kube.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}},
		{"delete an events.k8s.io Event", func() error {
			return kube.EventsV1().Events(ns).Delete(ctx, "e", metav1.DeleteOptions{})
		}},
		{"update an events.k8s.io Event", func() error {
			ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: ns}}
			_, err := kube.EventsV1().Events(ns).Update(ctx, ev, metav1.UpdateOptions{})
			return err
		}},
		{"create a Lease outside its namespace", func() error {
			_, err := kube.CoordinationV1().Leases(ns).Create(ctx,
				&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{})
			return err
		}},
		{"delete a Lease in its namespace", func() error {
			return kube.CoordinationV1().Leases(controllerNamespace).Delete(ctx, "book-controller", metav1.DeleteOptions{})
		}},
		{"list Leases outside its namespace", func() error {
			_, err := kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"update its own Role", func() error {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: leaderElectionRole, Namespace: controllerNamespace},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
			_, err := kube.RbacV1().Roles(controllerNamespace).Update(ctx, role, metav1.UpdateOptions{})
			return err
		}},
		{"bind cluster-admin", func() error {
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: controllerName, Namespace: controllerNamespace}}}
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			return err
		}},
		{"delete the namespace", func() error {
			return kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if !apierrors.IsForbidden(err) {
				t.Errorf("err = %v, want 403 Forbidden", err)
			}
		})
	}

	// And the Lease verbs leader election needs work, in its namespace only
	// (--shards also lists the shard Leases).
	t.Run("get, list, create and update a Lease in its namespace", func(t *testing.T) {
		leases := kube.CoordinationV1().Leases(controllerNamespace)
		name := fmt.Sprintf("deploy-test-%d", time.Now().UnixNano())
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Kube.CoordinationV1().Leases(controllerNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		})
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = &name
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNamespacedOverlayRBAC applies the namespaced overlay's RBAC for a
// ServiceAccount of its own (the base's ClusterRoleBinding would otherwise
// grant the base's ServiceAccount everything anyway) and runs the controller
// on it, watching the overlay's namespace: it converges there, and has no
// access to any other namespace.
func TestNamespacedOverlayRBAC(t *testing.T) {
	ctx := context.Background()
	objs := env.RenderManifests(t, namespacedDir)
	watch := watchedNamespace(t, objs)
	const sa = "book-controller-namespaced-test"

	var identity []*unstructured.Unstructured
	for _, obj := range objs {
		if !framework.IsIdentityObject(obj) {
			continue
		}
		obj = obj.DeepCopy()
		switch obj.GetKind() {
		case "ServiceAccount":
			obj.SetName(sa)
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			toTyped(t, obj, &rb)
			if !slices.Equal(rb.Subjects, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: controllerName, Namespace: controllerNamespace}}) {
				t.Fatalf("RoleBinding %s/%s subjects %+v", rb.Namespace, rb.Name, rb.Subjects)
			}
			obj.SetName(obj.GetName() + "-namespaced-test")
			subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
			subjects[0].(map[string]any)["name"] = sa
			if err := unstructured.SetNestedSlice(obj.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		case "ClusterRole", "ClusterRoleBinding":
			t.Fatalf("the namespaced overlay has a %s", obj.GetKind())
		}
		identity = append(identity, obj)
	}
	env.ApplyIdentityObjects(t, identity)
	t.Cleanup(func() {
		for _, obj := range identity {
			switch obj.GetKind() {
			case "ServiceAccount":
				_ = env.Kube.CoreV1().ServiceAccounts(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			case "RoleBinding":
				_ = env.Kube.RbacV1().RoleBindings(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			}
		}
	})

	cfg := env.ImpersonateServiceAccount(controllerNamespace, sa)
	env.WaitForAccess(t, cfg,
		authorizationv1.ResourceAttributes{Verb: "watch", Group: "webapp.ydzs.io", Resource: "books", Namespace: watch},
		authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: controllerNamespace},
	)

	denied := newDeniedRecorder(t)
	env.StartController(t, framework.ControllerOptions{
		Namespace:      watch,
		RESTConfig:     denied.Wrap(cfg),
		LeaderElection: leaderElection(t),
	})
	name := fmt.Sprintf("book-%d", time.Now().UnixNano())
	if _, err := env.Books.WebappV2().Books(watch).Create(ctx, framework.NewBook(watch, name, "namespaced", 7), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Books.WebappV2().Books(watch).Delete(ctx, name, metav1.DeleteOptions{}) })
	env.WaitForReady(t, watch, name, metav1.ConditionTrue, controller.ReasonConfigMapReady)
	env.WaitForEvent(t, watch, name, corev1.EventTypeNormal, controller.EventConfigMapCreated)

	other := env.Namespace(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	bookClient := versioned.NewForConfigOrDie(cfg)
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"list Books in all namespaces", func() error {
			_, err := bookClient.WebappV2().Books("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list Books in another namespace", func() error {
			_, err := bookClient.WebappV2().Books(other).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a ConfigMap in another namespace", func() error {
			_, err := kube.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{"create an Event in another namespace", func() error {
			_, err := kube.EventsV1().Events(other).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{"delete a ConfigMap in the watched namespace", func() error {
			return kube.CoreV1().ConfigMaps(watch).Delete(ctx, name, metav1.DeleteOptions{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.do(); !apierrors.IsForbidden(err) {
				t.Errorf("err = %v, want 403 Forbidden", err)
			}
		})
	}
}

// deniedRecorder records every request of a rest.Config that the API server
// answers 403 Forbidden.
type deniedRecorder struct {
	mu   sync.Mutex
	reqs []string
}

// newDeniedRecorder returns a recorder that fails the test at cleanup, after
// the controllers started later have stopped, if any request was denied: a
// rule the code needs is missing from the manifests.
func newDeniedRecorder(t *testing.T) *deniedRecorder {
	d := &deniedRecorder{}
	t.Cleanup(func() {
		if reqs := d.list(); len(reqs) > 0 {
			n := len(reqs)
			slices.Sort(reqs)
			t.Errorf("the API server denied %d requests of the controller's ServiceAccount; its Role or ClusterRole lacks a rule the code needs:\n  %s",
				n, strings.Join(slices.Compact(reqs), "\n  "))
		}
	})
	return d
}

func (d *deniedRecorder) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				d.mu.Lock()
				d.reqs = append(d.reqs, req.Method+" "+req.URL.Path)
				d.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

func (d *deniedRecorder) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.reqs)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
