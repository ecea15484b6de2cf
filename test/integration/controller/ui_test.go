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
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/ui"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestUIJourney runs the controller with the live view on and checks, over
// its JSON API, that a new Book's journey is recorded against the real API
// server: the event, the worker, both writes with the resourceVersions the
// API server gave, the successful sync, and the echoes of both writes.
func TestUIJourney(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	addr := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, UIAddr: addr})
	framework.Eventually(t, "the UI to answer", framework.AnswersOK(addr, "/api/snapshot"))
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "j", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "j", metav1.ConditionTrue, "ConfigMapReady")
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "j", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var j ui.Journey
	framework.Eventually(t, "the journey with both echoes", func(context.Context) error {
		code, body, err := framework.HTTPGet(addr, "/api/journeys/"+ns+"/j")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("GET journey: %d %v", code, err)
		}
		if err := json.Unmarshal([]byte(body), &j); err != nil {
			return err
		}
		echoes := 0
		for _, s := range j.Path {
			if s.EchoOf != nil {
				echoes++
			}
		}
		return poll.Done(echoes == 2, "%d echoes in %d steps", echoes, len(j.Path))
	})
	var create *ui.Step
	for i, s := range j.Path {
		if s.Kind == "write" && s.Verb == "create" {
			create = &j.Path[i]
		}
	}
	if create == nil || create.Code != http.StatusCreated || create.ResourceVersion != cm.ResourceVersion {
		t.Errorf("the ConfigMap's create step: %+v; want 201 at the ConfigMap's resourceVersion %s", create, cm.ResourceVersion)
	}
	if first := j.Path[0]; first.Kind != "event" || first.Informer != "books" || first.Decision != "enqueued" || first.Queued != "live" {
		t.Errorf("first step: %+v, want the Book's add, enqueued in the live line", first)
	}
}

// TestSecureUI runs the controller with --metrics-secure and the live view
// on: the view answers over HTTPS only to a token the API server accepts
// (TokenReview) of a user allowed to get the path under
// manager.UIAuthPrefix (SubjectAccessReview). Every authenticated user may
// get /api/* (system:discovery): that must not be enough.
func TestSecureUI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "book-controller-ui-viewer-" + ns},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{manager.UIAuthPrefix + "/*"}, Verbs: []string{"get"}}},
	}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	viewer := env.ServiceAccountToken(t, ns, "viewer")
	env.BindClusterRole(t, role.Name, ns, "viewer", "get", manager.UIAuthPrefix+"/api/snapshot")
	stranger := env.ServiceAccountToken(t, ns, "stranger")

	addr := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, RESTConfig: env.ControllerServiceAccountConfig(t),
		MetricsAddr: framework.FreeAddr(t), MetricsSecure: true, UIAddr: addr})
	framework.Eventually(t, "the secure UI to answer the viewer 200", framework.AnswersOKOverTLS(addr, "/api/snapshot", viewer, nil))
	for _, c := range []struct {
		who, token, path string
		want             int
	}{
		{"no token", "", "/api/snapshot", http.StatusUnauthorized},
		{"a token the API server rejects", "forged", "/", http.StatusUnauthorized},
		{"a user without the permission", stranger, "/api/snapshot", http.StatusForbidden},
		{"a user without the permission, a journey", stranger, "/api/journeys/" + ns + "/b", http.StatusForbidden},
		{"the viewer, a journey not kept", viewer, "/api/journeys/" + ns + "/b", http.StatusNotFound},
		{"the viewer, the page", viewer, "/", http.StatusOK},
	} {
		code, _, err := framework.HTTPSGet(addr, c.path, c.token, nil)
		if err != nil || code != c.want {
			t.Errorf("%s, GET %s: %d %v, want %d", c.who, c.path, code, err, c.want)
		}
	}
	if code, _, err := framework.HTTPGet(addr, "/api/snapshot"); err == nil && code == http.StatusOK {
		t.Error("the secure UI answers plain HTTP")
	}
}
