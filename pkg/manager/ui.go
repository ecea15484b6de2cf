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
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/metrics"
	"ydzs.io/book-controller/pkg/ui"
)

// The live view of the machinery (pkg/ui, docs/ui.md): off unless
// Config.UIAddr is set. It shows Book contents and the controller's
// internals, so with MetricsSecure it is behind the metrics' TokenReview /
// SubjectAccessReview filter and TLS.

const uiAddrFlag = "--ui-bind-address"

// UIAuthPrefix is put before the path of each request to the secure UI
// when its SubjectAccessReview asks whether the caller may get it: the
// UI's own paths under /api/ are granted to every authenticated user by
// Kubernetes' default system:discovery ClusterRole. A viewer needs
// nonResourceURLs ["/book-controller-ui/*"], verbs ["get"].
const UIAuthPrefix = "/book-controller-ui"

// setUpUI makes, when the UI is on, the Recorder every controller this Run
// builds reports to (also each shard's, built later from cfg.Controller).
func (m *manager) setUpUI() {
	if m.cfg.UIAddr == "" || m.cfg.UIAddr == disabledAddr {
		return
	}
	m.ui = ui.NewRecorder(ui.Options{Workers: m.cfg.Workers, SourceURL: m.cfg.UISourceURL})
	m.cfg.Controller.Observer = m.ui
}

// serveUI binds the UI's address and serves it until Run returns. Its
// event streams end as the server shuts down, so they do not hold it up.
func (m *manager) serveUI(ctx context.Context) error {
	if m.ui == nil {
		return nil
	}
	// Lasts until Run returns: the certificate of a secure UI is watched
	// while it lasts.
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	m.onStop(stopServing)
	page := ui.NewServer(m.ui, prometheus.Gatherers{metrics.Registry, m.metrics.registry})
	s, err := listenUI(serveCtx, m.cfg, m.clients.kubeReads, page)
	if s == nil || err != nil {
		return err
	}
	s.srv.RegisterOnShutdown(page.Close)
	s.serve(ctx)
	m.onStop(s.stop)
	scheme := "http"
	if m.cfg.MetricsSecure {
		scheme = "https"
	}
	klog.FromContext(ctx).Info("Serving the live view of the controller", "url", scheme+"://"+s.ln.Addr().String()+"/")
	return nil
}

// listenUI is listenMetrics for the UI's flag and address. Its
// SubjectAccessReview asks for the path under UIAuthPrefix.
func listenUI(ctx context.Context, cfg Config, kube kubernetes.Interface, h http.Handler) (*httpServer, error) {
	return listenAuthorized(ctx, cfg, kube, uiAddrFlag, cfg.UIAddr, "ui", h,
		func(filter func(http.Handler) http.Handler) http.Handler {
			return underPrefix(UIAuthPrefix, filter(http.StripPrefix(UIAuthPrefix, h)))
		})
}

// underPrefix hands next each request with prefix put before its path.
func underPrefix(prefix string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := req.Clone(req.Context())
		r.URL.Path = prefix + req.URL.Path
		r.URL.RawPath = ""
		next.ServeHTTP(w, r)
	})
}
