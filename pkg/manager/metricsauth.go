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
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/metrics"
)

const metricsAddrFlag = "--metrics-bind-address"

// listenMetrics binds the metrics endpoint serving h: plain HTTP, or with
// Config.MetricsSecure, HTTPS that lets through only callers the API server
// authenticates (TokenReview) and allows to get the path
// (SubjectAccessReview), as kubebuilder's scaffold does. The certificate
// is watched until ctx ends. Returns nil when the endpoint is off.
func listenMetrics(ctx context.Context, cfg Config, kube kubernetes.Interface, h http.Handler) (*httpServer, error) {
	return listenAuthorized(ctx, cfg, kube, metricsAddrFlag, cfg.MetricsAddr, "metrics", h,
		func(filter func(http.Handler) http.Handler) http.Handler { return filter(h) })
}

// listenAuthorized binds addr for the endpoint of flag: plain HTTP serving
// h, or with Config.MetricsSecure, HTTPS serving what guard builds around
// h with the TokenReview / SubjectAccessReview filter, for the metrics.
// The live view (ui.go) shares it, so both are guarded alike. // fork:line ui
func listenAuthorized(ctx context.Context, cfg Config, kube kubernetes.Interface, flag, addr, name string, h http.Handler,
	guard func(filter func(http.Handler) http.Handler) http.Handler) (*httpServer, error) {
	if !cfg.MetricsSecure {
		return listen(flag, addr, h)
	}
	filter, err := metrics.AuthFilter(klog.FromContext(ctx).WithName(name), kube.AuthenticationV1(), kube.AuthorizationV1())
	if err != nil {
		return nil, err
	}
	s, err := listen(flag, addr, guard(filter))
	if s == nil || err != nil {
		return s, err
	}
	tlsConfig, err := metrics.ServingTLS(ctx, cfg.MetricsCertDir)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.ln = tls.NewListener(s.ln, tlsConfig)
	s.name += " (https)"
	return s, nil
}
