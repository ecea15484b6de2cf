//go:build e2e && linux

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

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/test/integration/framework"
)

// The webhook's Service and the pods of manifests/components/webhook-only.
const (
	webhookService   = "book-controller-webhook"
	webhookPodLabels = "app.kubernetes.io/name=book-controller,app.kubernetes.io/component=webhook"
)

// testConversionThroughTheService: the CRD that make deploy installed
// converts through the controller's pods, by their Service (on this node:
// the egress proxy into the pod network, docs/node.md): their CA is in the
// caBundle, a v2 Book reads as v1, and a v1 Book, applied as a v1 user
// does, is read and made Ready by the controller in v2. Conversion then
// goes on with the controller scaled to zero, through the webhook-only
// component's pods.
func testConversionThroughTheService(t *testing.T) {
	ns := env.Namespace(t)
	waitRolledOut(t, 2)
	poll.Eventually(t, "the replicas' CA in the CRD's conversion caBundle", time.Second, podWait, caBundleWritten)
	kubectl(t, "apply", "-n", ns, "-f", "manifests/examples/v2/book-sample.yaml")
	poll.Eventually(t, "book-sample-v2 read as v1", time.Second, podWait, readAsV1(ns, "book-sample-v2", 20))
	kubectl(t, "apply", "-n", ns, "-f", "manifests/examples/book-sample.yaml")
	waitBooksReady(t, ns, 2, framework.Timeout)

	run(t, "make", "deploy", "MANIFESTS="+webhookOnlyKustomization(t), "IMG="+image)
	scale(t, 0)
	poll.Eventually(t, "only the webhook-only pods behind the Service", time.Second, podWait, onlyWebhookPodsServe)
	kubectl(t, "apply", "-n", ns, "-f", "manifests/examples/v2/book-jpy.yaml")
	poll.Eventually(t, "book-jpy read as v1 with the controller scaled to zero", time.Second, podWait, readAsV1(ns, "book-jpy", 3960))

	scale(t, 2)
	waitRolledOut(t, 2)
	waitBooksReady(t, ns, 3, framework.Timeout)
}

func caBundleWritten(ctx context.Context) error {
	crd, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, framework.BookCRD, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return fmt.Errorf("no conversion webhook in the CRD: %+v", conv)
	}
	cc := conv.Webhook.ClientConfig
	return poll.Done(len(cc.CABundle) > 0 && cc.Service != nil && cc.Service.Name == webhookService,
		"clientConfig: service %+v, caBundle of %d bytes", cc.Service, len(cc.CABundle))
}

// readAsV1 is a check that the Book reads as v1 with the price rounded
// and what v1 cannot hold in its annotation: a conversion by the webhook.
func readAsV1(ns, name string, price int32) poll.Check {
	return func(ctx context.Context) error {
		b, err := env.Books.WebappV1().Books(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return poll.Done(b.Spec.Price == price && b.Annotations[webappv1.StashAnnotation] != "",
			"as v1: price %d (want %d), %s %q", b.Spec.Price, price, webappv1.StashAnnotation, b.Annotations[webappv1.StashAnnotation])
	}
}

// webhookOnlyKustomization is a user's kustomization that adds the
// webhook-only component and nothing else.
func webhookOnlyKustomization(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes components by relative path only.
	rel, err := filepath.Rel(dir, filepath.Join(framework.RepoRoot(), "manifests/components/webhook-only"))
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n- " + rel + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// onlyWebhookPodsServe checks that the Service's ready endpoints are
// exactly the webhook-only pods, both Ready, and no controller pod.
func onlyWebhookPodsServe(ctx context.Context) error {
	pods, err := env.Kube.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: webhookPodLabels})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
			want[p.Status.PodIP] = true
		}
	}
	eps, err := env.Kube.DiscoveryV1().EndpointSlices(systemNS).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + webhookService})
	if err != nil {
		return err
	}
	var ready []string
	for _, s := range eps.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready = append(ready, ep.Addresses...)
			}
		}
	}
	controllers, err := env.Kube.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: podLabels})
	if err != nil {
		return err
	}
	ok := len(want) == 2 && len(ready) == 2 && len(controllers.Items) == 0
	for _, ip := range ready {
		ok = ok && want[ip]
	}
	return poll.Done(ok, "webhook-only pods ready at %v, the Service's ready endpoints %v, %d controller pods",
		want, ready, len(controllers.Items))
}
