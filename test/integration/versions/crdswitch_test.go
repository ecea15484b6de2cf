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

package versions_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/webhook"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestWebhookStartsWhenTheCRDSwitches: a controller started under a Book
// CRD that converts nothing (pkg/manager/webhookswitch.go) starts its
// conversion webhook when `kubectl apply -f manifests/crd.yaml` switches
// the CRD to it, with no restart: v1 reads of a v2 Book it already made
// Ready work, converted by it, and /readyz stays green. It changes the
// CRD, so it runs alone (not parallel) and puts crd.yaml's spec back. Its
// file's name puts it first in the package, while no other test has left a
// Book that only a webhook, gone with its test, could convert.
func TestWebhookStartsWhenTheCRDSwitches(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	const controllerNS = "book-controller-system"
	t.Cleanup(func() { restoreCRD(t, ns) })
	setConversionNone(t)

	cfg := env.ControllerServiceAccountConfig(t)
	env.WaitForAccess(t, cfg,
		authorizationv1.ResourceAttributes{Verb: "watch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: webhook.DefaultCRDName},
		authorizationv1.ResourceAttributes{Verb: "update", Resource: "secrets", Namespace: controllerNS, Name: webhook.DefaultSecretName},
		authorizationv1.ResourceAttributes{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: webhook.DefaultCRDName})
	probe := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, RESTConfig: cfg, ProbeAddr: probe,
		Webhook: manager.Webhook{Addr: "127.0.0.1:0", Loopback: true, Namespace: controllerNS}})
	t.Cleanup(func() { deleteBooks(t, ns) }) // while its webhook still serves

	book := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "before-the-switch"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}, Authors: []string{"A"}}}
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, book, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, book.Name, metav1.ConditionTrue, "")
	framework.Eventually(t, "/readyz before the switch", framework.Readyz(probe))

	env.SwitchCRD(t, "crd.yaml")
	framework.Eventually(t, "a v1 read of the Book, converted by the controller's webhook", func(ctx context.Context) error {
		got, err := env.Books.WebappV1().Books(ns).Get(ctx, book.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// Without conversion the API server would hand v2's price object
		// to v1's integer and fail; the webhook rounds it and stashes v2's.
		if got.Spec.Price != 20 || got.Annotations[webappv1.StashAnnotation] == "" {
			return fmt.Errorf("v1 price %d, stash %q: want 20 and v2's fields", got.Spec.Price, got.Annotations[webappv1.StashAnnotation])
		}
		return nil
	})
	framework.Eventually(t, "/readyz after the switch", framework.Readyz(probe))
}

// TestWebhookLeavesAnotherInstallsCRDAlone: a replica installed in another
// namespace than the one the CRD's webhook Service is in (the namespaced
// overlay beside the cluster's install) serves no webhook: it takes no
// port, writes no Secret and leaves the CRD as it was, though its
// credentials (cluster-admin here) would let it, and it syncs its Books.
// It changes the CRD, so it runs alone and puts crd.yaml's spec back.
func TestWebhookLeavesAnotherInstallsCRDAlone(t *testing.T) {
	ctx := t.Context()
	ns, otherNS := env.Namespace(t), env.Namespace(t)
	t.Cleanup(func() { restoreCRD(t, ns) })
	env.SwitchCRD(t, "crd.yaml") // book-controller-system's Service, no CA yet
	before, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, framework.BookCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	webhookAddr := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, RESTConfig: env.RESTConfig(),
		Webhook: manager.Webhook{Addr: webhookAddr, Namespace: otherNS}})
	t.Cleanup(func() { deleteBooks(t, ns) })

	// The replica decides about the webhook before its informers start, so
	// a Book it made Ready comes after anything the webhook would write.
	book := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "1", Currency: "XXX"}}}
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, book, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, book.Name, metav1.ConditionTrue, "")

	after, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, framework.BookCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || !apiequality.Semantic.DeepEqual(after.Spec.Conversion, before.Spec.Conversion) {
		t.Errorf("the other install's CRD was changed: generation %d, was %d; caBundle %d bytes, was %d",
			after.Generation, before.Generation, len(caBundle(after)), len(caBundle(before)))
	}
	if _, err := env.Kube.CoreV1().Secrets(otherNS).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook's Secret in %s: %v, want none", otherNS, err)
	}
	if conn, err := net.DialTimeout("tcp", webhookAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s (--webhook-bind-address) accepts connections: the replica serves a webhook that is not its CRD's", webhookAddr)
	}
}

// deleteBooks deletes the Books of ns and waits until they are gone. The
// API server's v1 watch cache converts every stored Book; one it cannot
// convert, once no webhook serves, keeps that cache from listing, and the
// v1 requests of the tests after this one fail with 429.
func deleteBooks(t *testing.T, ns string) {
	t.Helper()
	books := env.Books.WebappV2().Books(ns)
	if err := books.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the Books of %s: %v", ns, err)
		return
	}
	// In a cleanup, where t.Context() has ended.
	err := poll.Until(context.Background(), "the Books of "+ns+" gone", framework.PollInterval, framework.Timeout, func(ctx context.Context) error {
		l, err := books.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		return poll.Done(len(l.Items) == 0, "%d Books left", len(l.Items))
	})
	if err != nil {
		t.Error(err)
	}
}

// restoreCRD gives the CRD crd.yaml's spec back, and waits until v1 lists
// (of ns, whose Books are gone) work again: the storage a change of the CRD
// starts lists every Book through its v1 watch cache, and the tests after
// this one read v1.
func restoreCRD(t *testing.T, ns string) {
	t.Helper()
	env.SwitchCRD(t, "crd.yaml")
	if err := poll.Until(context.Background(), "v1 lists to work after the CRD's change", framework.PollInterval, framework.Timeout,
		env.V1ListWorks(ns)); err != nil {
		t.Error(err)
	}
}

// caBundle is the CA the API server trusts for crd's webhook.
func caBundle(crd *apiextensionsv1.CustomResourceDefinition) []byte {
	if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil {
		return c.Webhook.ClientConfig.CABundle
	}
	return nil
}

// setConversionNone has the installed Book CRD convert nothing, as a CRD
// without a webhook does.
func setConversionNone(t *testing.T) {
	t.Helper()
	updateCRD(t, "setting the CRD's conversion to None", func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	})
}
