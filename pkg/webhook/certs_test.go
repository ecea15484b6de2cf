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

package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

const testNamespace = "book-controller-system"

func webhookCRD(strategy apiextensionsv1.ConversionStrategyType) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: DefaultCRDName}}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
	if strategy == apiextensionsv1.WebhookConverter {
		port := int32(443)
		path := Path
		crd.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: testNamespace, Name: DefaultServiceName, Path: &path, Port: &port}},
		}
	}
	return crd
}

type fixture struct {
	kube  *fake.Clientset
	crds  *apiextensionsfake.Clientset
	clock *clocktesting.FakeClock
}

func newFixture(crd *apiextensionsv1.CustomResourceDefinition) *fixture {
	f := &fixture{kube: fake.NewClientset(), crds: apiextensionsfake.NewClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	if crd != nil {
		f.crds = apiextensionsfake.NewClientset(crd)
	}
	return f
}

func (f *fixture) certs(t *testing.T, loopback string) *Certs {
	t.Helper()
	c, err := NewCerts(CertConfig{Kube: f.kube, CRDs: f.crds, Namespace: testNamespace, LoopbackURL: loopback,
		CALifetime: 90 * time.Hour, ServingLifetime: 30 * time.Hour, RotationStep: time.Hour, CheckInterval: 10 * time.Minute, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fixture) crd(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), DefaultCRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func (f *fixture) patches() int {
	n := 0
	for _, a := range f.crds.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

// verifies checks that what c serves verifies, for the Service's name and
// for 127.0.0.1, under the CRD's caBundle at the fake clock's time.
func verifies(t *testing.T, f *fixture, c *Certs) *x509.Certificate {
	t.Helper()
	cert, err := c.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.crd(t).Spec.Conversion.Webhook.ClientConfig.CABundle) {
		t.Fatal("the CRD's caBundle holds no certificate")
	}
	for _, name := range []string{DefaultServiceName + "." + testNamespace + ".svc", "127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: f.clock.Now()}); err != nil {
			t.Fatalf("at %s the served certificate does not verify for %s under the CRD's caBundle: %v", f.clock.Now(), name, err)
		}
	}
	return leaf
}

func TestCreatesTheSecretAndInjectsTheCA(t *testing.T) {
	f := newFixture(webhookCRD(apiextensionsv1.WebhookConverter))
	c := f.certs(t, "")
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := f.kube.CoreV1().Secrets(testNamespace).Get(t.Context(), DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels[ManagedLabel] != managedLabelValue {
		t.Errorf("Secret labels %v", s.Labels)
	}
	leaf := verifies(t, f, c)
	if f.patches() != 1 {
		t.Errorf("%d patches of the CRD, want 1", f.patches())
	}
	if f.crd(t).Spec.Conversion.Webhook.ClientConfig.Service == nil {
		t.Error("the Service reference was dropped without a loopback URL")
	}

	// Another replica uses the same Secret; nothing is written again.
	other := f.certs(t, "")
	if err := other.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if leaf2 := verifies(t, f, other); !leaf2.Equal(leaf) {
		t.Error("a second replica serves another certificate")
	}
	if f.patches() != 1 {
		t.Errorf("%d patches of the CRD after syncs with nothing to change, want 1", f.patches())
	}
}

func TestLeavesACRDWithoutWebhookAlone(t *testing.T) {
	for name, crd := range map[string]*apiextensionsv1.CustomResourceDefinition{
		"None strategy": webhookCRD(apiextensionsv1.NoneConverter), "no CRD": nil} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(crd)
			c := f.certs(t, "https://127.0.0.1:9443/convert")
			if err := c.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if f.patches() != 0 {
				t.Errorf("%d patches of a CRD without a conversion webhook", f.patches())
			}
			if _, err := c.GetCertificate(nil); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestLoopbackURL(t *testing.T) {
	f := newFixture(webhookCRD(apiextensionsv1.WebhookConverter))
	url := "https://127.0.0.1:9443/convert"
	c := f.certs(t, url)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	cc := f.crd(t).Spec.Conversion.Webhook.ClientConfig
	if cc.URL == nil || *cc.URL != url || cc.Service != nil {
		t.Errorf("clientConfig %+v, want url %s and no service", cc, url)
	}
	verifies(t, f, c)
}

func TestNeverWritesSomeoneElsesSecret(t *testing.T) {
	f := newFixture(webhookCRD(apiextensionsv1.WebhookConverter))
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DefaultSecretName, Namespace: testNamespace},
		Data: map[string][]byte{"tls.crt": []byte("theirs")}}
	if _, err := f.kube.CoreV1().Secrets(testNamespace).Create(t.Context(), theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := f.certs(t, "").Sync(t.Context())
	if err == nil || !strings.Contains(err.Error(), "without the label "+ManagedLabel) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want one line saying the Secret is not the webhook's", err)
	}
	s, _ := f.kube.CoreV1().Secrets(testNamespace).Get(t.Context(), DefaultSecretName, metav1.GetOptions{})
	if string(s.Data["tls.crt"]) != "theirs" {
		t.Error("someone else's Secret was written")
	}
}

// TestRotation walks the fake clock through two CA lifetimes, syncing
// every check interval, and wants the served certificate to verify under
// the CRD's caBundle at every moment, the three steps of each CA rotation
// in order, and the serving certificate renewed between.
func TestRotation(t *testing.T) {
	f := newFixture(webhookCRD(apiextensionsv1.WebhookConverter))
	replicas := []*Certs{f.certs(t, ""), f.certs(t, "")}
	var steps []string
	var bundleSizes []int
	for range 2 * 90 * 6 {
		for _, c := range replicas {
			before := c.Rotations()
			if err := c.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if c.Rotations() > before {
				cas, _ := parseBundle(f.crd(t).Spec.Conversion.Webhook.ClientConfig.CABundle)
				bundleSizes = append(bundleSizes, len(cas))
				steps = append(steps, *c.lastStep.Load())
			}
			verifies(t, f, c)
		}
		f.clock.Step(10 * time.Minute)
	}
	// Each CA rotation: 2 CAs trusted, the serving certificate switched
	// (still 2), then 1. Serving renewals (at 20h of 30h) keep 1.
	joined := strings.Join(steps, ",")
	// A serving renewal may come between the steps (it is signed by the
	// CA that signs at the time).
	joined = strings.ReplaceAll(joined, EventWebhookServingRenewed+",", "")
	if !strings.Contains(joined, EventWebhookCARotating+","+EventWebhookServingSwitched+","+EventWebhookCARetired) {
		t.Errorf("steps %s: want the three steps of a CA rotation in order", joined)
	}
	if strings.Count(joined, EventWebhookCARotating) < 2 {
		t.Errorf("steps %s: want at least 2 CA rotations in two CA lifetimes", joined)
	}
	t.Logf("steps: %s; trusted CAs after each: %v", joined, bundleSizes)
}

// TestReplicasStartingTogether: several replicas start at once on an empty
// namespace; every one starts, and all serve the same certificate.
func TestReplicasStartingTogether(t *testing.T) {
	f := newFixture(webhookCRD(apiextensionsv1.WebhookConverter))
	replicas := make([]*Certs, 4)
	errs := make(chan error, len(replicas))
	for i := range replicas {
		replicas[i] = f.certs(t, "")
		go func(c *Certs) { errs <- c.Sync(t.Context()) }(replicas[i])
	}
	for range replicas {
		if err := <-errs; err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	for _, c := range replicas {
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	want := verifies(t, f, replicas[0])
	for _, c := range replicas[1:] {
		if !verifies(t, f, c).Equal(want) {
			t.Error("replicas serve different certificates")
		}
	}
}
