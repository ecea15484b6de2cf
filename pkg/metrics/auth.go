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

package metrics

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
)

// How long the API server's answers are reused, as in controller-runtime's
// pkg/metrics/filters: Prometheus scrapes every 15–60 s with the same token,
// so most scrapes cost no TokenReview or SubjectAccessReview. A revoked
// binding is honoured within AllowCacheTTL; a new one within DenyCacheTTL.
const (
	TokenCacheTTL = time.Minute
	AllowCacheTTL = 5 * time.Minute
	DenyCacheTTL  = 30 * time.Second
)

// webhookBackoff is k8s.io/apiserver's DefaultAuthWebhookRetryBackoff, the
// retries of one TokenReview or SubjectAccessReview (copied, as
// controller-runtime does, so as not to import pkg/server/options).
var webhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// AuthFilter wraps the metrics handler so that only callers the API server
// vouches for get through: the bearer token is checked with a TokenReview,
// and the user must be allowed "get" on the request's path (a
// nonResourceURLs rule, as in the metrics-reader ClusterRole) by a
// SubjectAccessReview. Both come from k8s.io/apiserver's delegating
// authenticator and authorizer, the ones aggregated API servers and
// controller-runtime's pkg/metrics/filters use, answers cached.
//
// Replies follow kube-apiserver's own filters: 401 when the caller is not
// authenticated (no token, a bad one, or the TokenReview failed), 403 when
// the user lacks the permission, 500 when the SubjectAccessReview failed.
func AuthFilter(logger klog.Logger, authn authenticationv1.AuthenticationV1Interface, authz authorizationv1.AuthorizationV1Interface) (func(http.Handler) http.Handler, error) {
	authenticator, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &webhookBackoff,
		CacheTTL:                 TokenCacheTTL,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authz8r, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             AllowCacheTTL,
		DenyCacheTTL:              DenyCacheTTL,
		WebhookRetryBackoff:       &webhookBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return func(next http.Handler) http.Handler {
		return &authFilter{logger: logger, authn: authenticator, authz: authz8r, next: next}
	}, nil
}

// authFilter is the handler AuthFilter puts in front of next.
type authFilter struct {
	logger klog.Logger
	authn  authenticator.Request
	authz  authorizer.Authorizer
	next   http.Handler
}

func (f *authFilter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	resp, ok, err := f.authn.AuthenticateRequest(req)
	if err != nil || !ok {
		if err != nil {
			// A bad or expired token, or a TokenReview the API server
			// refused (missing RBAC): the error tells which.
			f.logger.Info("Metrics request not authenticated", "remote", req.RemoteAddr, "err", err)
		}
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	attrs := authorizer.AttributesRecord{
		User:            resp.User,
		Verb:            strings.ToLower(req.Method),
		Path:            req.URL.Path,
		ResourceRequest: false,
	}
	decision, reason, err := f.authz.Authorize(req.Context(), attrs)
	if err != nil {
		f.logger.Error(err, "Metrics request: SubjectAccessReview failed", "user", resp.User.GetName())
		http.Error(w, "Authorization check failed", http.StatusInternalServerError)
		return
	}
	if decision != authorizer.DecisionAllow {
		f.logger.V(2).Info("Metrics request forbidden", "user", resp.User.GetName(), "path", req.URL.Path, "reason", reason)
		http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", resp.User.GetName(), attrs.Verb, req.URL.Path), http.StatusForbidden)
		return
	}
	f.next.ServeHTTP(w, req)
}
