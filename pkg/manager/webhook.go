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
	"context"
	"crypto/tls"
	"fmt"
	"net"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/leader"
	"ydzs.io/book-controller/pkg/webhook"
)

// Webhook configures the Book CRD's conversion webhook (pkg/webhook).
type Webhook struct {
	// Addr serves it over TLS; "" or "0" is off.
	Addr string
	// CertDir, when set, holds tls.crt and tls.key (a cert-manager
	// Certificate's Secret, mounted), and the webhook manages no
	// certificate: cert-manager's CA injector writes the caBundle.
	// Empty: the webhook keeps a CA and its serving certificate in a
	// Secret in Namespace and writes the CA into the CRD.
	CertDir string
	// Namespace holds the Secret and the Service; empty means the pod's
	// namespace, or "default" outside a cluster.
	Namespace string
	// Loopback points the CRD's clientConfig at https://127.0.0.1:<port>/convert
	// instead of the Service: for a controller outside the cluster (make run).
	Loopback bool
	// Certs tunes the certificates' lifetimes (for tests); zero values are
	// pkg/webhook's defaults.
	Certs webhook.CertConfig
	// Only runs the webhook and nothing else: no informers, no Lease, no
	// controller (webhookonly.go).
	Only bool
}

// serveWebhook starts the conversion webhook, before the preflight and the
// informers, which list Books through it, and outside leader election: the
// API server sends reviews to any replica behind the Service. It runs only
// when the Book CRD converts through this replica's webhook (manifests/
// crd.yaml names its Service; Webhook.converts): otherwise no port is taken
// nor Secret written until the CRD switches to it (webhookswitch.go).
func (m *manager) serveWebhook(ctx context.Context) error {
	wc := m.cfg.Webhook
	if wc.Addr == "" || wc.Addr == disabledAddr {
		return nil
	}
	cfg := rest.CopyConfig(m.clients.base)
	cfg.Dial = m.clients.others.DialContext
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the CustomResourceDefinition client: %w", err)
	}
	wanted, readable := webhookWanted(ctx, crds, wc)
	switch {
	case !wanted && readable && !wc.Only:
		return m.serveWebhookOnSwitch(ctx, crds, cfg)
	case !wanted:
		return nil
	}
	srv, stop, err := m.startWebhook(ctx, crds, cfg)
	if err != nil {
		return err
	}
	m.onStop(stop)
	m.webhookServer = srv
	m.readyChecks = append(m.readyChecks, srv.Ready)
	return nil
}

// startWebhook listens on --webhook-bind-address, gets the certificates and
// serves. stop ends the server and the certificates' rotation; it touches
// no field of m, so that webhookswitch.go can call it while Run goes on.
func (m *manager) startWebhook(ctx context.Context, crds apiextensionsclient.Interface, cfg *rest.Config) (*webhook.Server, func(), error) {
	wc := m.cfg.Webhook
	// Each replica counts its own reviews, in the manager's registry.
	handler := webhook.NewHandler(webhook.NewMetrics(m.metrics.registry), 0)
	m.showConversions(handler) // fork:line ui
	var getCert certGetter
	// certCtx lasts until Run returns: the certificates are kept fresh while
	// it lasts.
	certCtx, stopCerts := context.WithCancel(context.WithoutCancel(ctx))
	srv, err := webhook.Listen(wc.Addr, handler.Mux(), func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return getCert.GetCertificate(h)
	}, webhook.DefaultTimeouts)
	if err != nil {
		stopCerts()
		return nil, nil, fmt.Errorf("--webhook-bind-address %q: %v: choose another address, or %q to turn it off", wc.Addr, err, disabledAddr)
	}
	getCert, err = m.webhookCerts(certCtx, crds, cfg, srv)
	if err != nil {
		stopCerts()
		_ = srv.Close()
		if ctx.Err() != nil {
			return nil, nil, errStopped
		}
		return nil, nil, err
	}
	srv.Serve(ctx)
	klog.FromContext(ctx).Info("Serving the conversion webhook", "address", srv.Addr().String(), "certDir", wc.CertDir,
		"namespace", webhookNamespace(wc), "loopback", wc.Loopback)
	return srv, func() { srv.Stop(); stopCerts() }, nil
}

// fork:begin ui
// showConversions has the live view, when it is on, show each review the
// webhook answers (docs/ui.md).
func (m *manager) showConversions(h *webhook.Handler) {
	if m.ui == nil {
		return // and no nil *ui.Recorder in the Observer interface
	}
	h.SetObserver(m.ui)
	m.ui.ConversionWebhookServing()
}

// fork:end ui

// webhookWanted reports whether the Book CRD converts through this
// replica's webhook (wc.converts), and whether it could be read at all. Any
// doubt is "no": a CRD that cannot be read (missing: the preflight says so;
// forbidden: an older RBAC, which cannot have installed crd.yaml's webhook)
// is logged.
func webhookWanted(ctx context.Context, crds apiextensionsclient.Interface, wc Webhook) (wanted, readable bool) {
	logger := klog.FromContext(ctx)
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, webhook.DefaultCRDName, metav1.GetOptions{})
	// The usual cases (crd.yaml; no CRD, which the preflight reports in
	// its one line) are logged at -v=2, so that they add nothing to the
	// output of a controller that is fine, or fails for another reason.
	switch {
	case apierrors.IsNotFound(err):
		logger.V(2).Info("Conversion webhook off: no CRD", "crd", webhook.DefaultCRDName)
		return false, false
	case err != nil:
		logger.Info("Conversion webhook off: cannot read the CRD", "crd", webhook.DefaultCRDName, "err", err)
		return false, false
	case !convertsByWebhook(crd):
		logger.V(2).Info("Conversion webhook off until the CRD converts through one (manifests/crd.yaml)", "crd", webhook.DefaultCRDName)
		return false, true
	case !wc.converts(crd):
		logger.V(2).Info("Conversion webhook off: the CRD converts through another webhook", "crd", webhook.DefaultCRDName,
			"clientConfig", clientConfigString(crd), "service", webhookNamespace(wc)+"/"+webhook.DefaultServiceName)
		return false, true
	}
	return true, true
}

// converts reports whether the API server sends crd's conversions to this
// replica's webhook: the CRD converts through a webhook, and its
// clientConfig names our Service (our namespace's
// webhook.DefaultServiceName), or wc.Loopback makes the CRD ours to point
// at 127.0.0.1. A webhook named by a URL or by another namespace's Service
// is somebody else's: another install of the controller (the namespaced
// overlay's, whose CRD the cluster's install keeps) or a test's. Serving
// ours too would write our CA into the caBundle the API server trusts for
// theirs.
func (wc Webhook) converts(crd *apiextensionsv1.CustomResourceDefinition) bool {
	if !convertsByWebhook(crd) {
		return false
	}
	if wc.Loopback {
		return true
	}
	hook := crd.Spec.Conversion.Webhook
	if hook == nil || hook.ClientConfig == nil || hook.ClientConfig.Service == nil {
		return false
	}
	svc := hook.ClientConfig.Service
	return svc.Namespace == webhookNamespace(wc) && svc.Name == webhook.DefaultServiceName
}

// clientConfigString is where crd sends its conversions, for a log line.
func clientConfigString(crd *apiextensionsv1.CustomResourceDefinition) string {
	hook := crd.Spec.Conversion.Webhook
	switch {
	case hook == nil || hook.ClientConfig == nil:
		return "none"
	case hook.ClientConfig.URL != nil:
		return *hook.ClientConfig.URL
	case hook.ClientConfig.Service != nil:
		return "service " + hook.ClientConfig.Service.Namespace + "/" + hook.ClientConfig.Service.Name
	}
	return "none"
}

// convertsByWebhook reports whether the API server sends crd's conversions
// to a webhook.
func convertsByWebhook(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
}

// webhookCerts returns the webhook's certificates: from --webhook-cert-dir,
// or its own (kept fresh until ctx ends).
func (m *manager) webhookCerts(ctx context.Context, crds apiextensionsclient.Interface, cfg *rest.Config, srv *webhook.Server) (certGetter, error) {
	wc := m.cfg.Webhook
	if wc.CertDir != "" {
		return webhook.NewFileCerts(ctx, wc.CertDir)
	}
	cc := wc.Certs
	cc.CRDs, cc.Namespace = crds, webhookNamespace(wc)
	var err error
	if cc.Kube, err = kubernetes.NewForConfig(coreTypesConfig(cfg)); err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	if wc.Loopback {
		_, port, _ := net.SplitHostPort(srv.Addr().String())
		cc.LoopbackURL = "https://" + net.JoinHostPort("127.0.0.1", port) + webhook.Path
	}
	if cc.Recorder, err = newEventRecorder(ctx, cc.Kube, m.eventLimiter); err != nil {
		return nil, err
	}
	certs, err := webhook.NewCerts(cc)
	if err != nil {
		return nil, err
	}
	if err := certs.Start(ctx); err != nil {
		return nil, fmt.Errorf("conversion webhook certificates: %w", err)
	}
	return certs, nil
}

// certGetter serves a TLS certificate.
type certGetter interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

func webhookNamespace(wc Webhook) string {
	if wc.Namespace != "" {
		return wc.Namespace
	}
	return leader.PodNamespace()
}
