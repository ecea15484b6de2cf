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

package manager

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"ydzs.io/book-controller/pkg/ui"
	"ydzs.io/book-controller/pkg/webhook"
)

// TestShowConversions: with the live view off, the webhook has no
// observer (not a nil *ui.Recorder, which would panic on the first
// review); with it on, the Recorder counts each review and says the
// webhook is served.
func TestShowConversions(t *testing.T) {
	review := func(h *webhook.Handler) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, webhook.Path, nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("GET %s: %d, want 405", webhook.Path, rec.Code)
		}
	}
	m := &manager{}
	off := webhook.NewHandler(nil, 0)
	m.showConversions(off)
	review(off)

	m.ui = ui.NewRecorder(ui.Options{})
	on := webhook.NewHandler(nil, 0)
	m.showConversions(on)
	review(on)
	if c := m.ui.Snapshot(nil).Conversions; !c.Serving || c.Reviews != 1 || c.Results[webhook.ResultBadRequest] != 1 {
		t.Errorf("the live view's conversions: %+v, want served and the one bad request", c)
	}
}

// TestWebhookConvertsOnlyItsOwnCRD: a replica serves the conversion
// webhook, and writes its CA into the CRD, only when the CRD's clientConfig
// names its own Service, or with --webhook-loopback; another namespace's
// Service or a URL is somebody else's webhook.
func TestWebhookConvertsOnlyItsOwnCRD(t *testing.T) {
	url := "https://127.0.0.1:9443/convert"
	crd := func(cc *apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if cc == nil {
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			return c
		}
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: cc}}
		return c
	}
	service := func(ns, name string) *apiextensionsv1.WebhookClientConfig {
		return &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: name}}
	}
	ours := Webhook{Namespace: "book-controller-system"}
	for _, tc := range []struct {
		name string
		wc   Webhook
		crd  *apiextensionsv1.CustomResourceDefinition
		want bool
	}{
		{"no conversion", ours, &apiextensionsv1.CustomResourceDefinition{}, false},
		{"strategy None", ours, crd(nil), false},
		{"our Service", ours, crd(service("book-controller-system", webhook.DefaultServiceName)), true},
		{"another namespace's Service", ours, crd(service("team-a", webhook.DefaultServiceName)), false},
		{"another Service", ours, crd(service("book-controller-system", "other")), false},
		{"a URL", ours, crd(&apiextensionsv1.WebhookClientConfig{URL: &url}), false},
		{"a URL, with --webhook-loopback", Webhook{Loopback: true}, crd(&apiextensionsv1.WebhookClientConfig{URL: &url}), true},
		{"strategy None, with --webhook-loopback", Webhook{Loopback: true}, crd(nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.wc.converts(tc.crd); got != tc.want {
				t.Errorf("converts: got %v, want %v", got, tc.want)
			}
		})
	}
}
