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

// Package preflight turns the usual ways of being misconfigured into one
// sentence each, naming the cause and the fix, before anything starts:
// client-go would otherwise retry them for ever, logging each attempt.
// pkg/manager runs these checks as Run's "preflight" step.
package preflight

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// preflightTimeout bounds the first request, so a server that swallows
// packets fails fast instead of hanging the start-up.
const preflightTimeout = 15 * time.Second

// crdInstallHint is the fix for a cluster without the Book CRD.
const crdInstallHint = "kubectl apply -f manifests/crd.yaml"

// BookAPI asks the API server for the Book API and turns the common ways
// that fails into one sentence naming the cause and the fix: a server that
// cannot be reached, credentials it rejects, and a missing CRD.
func BookAPI(ctx context.Context, host string, client rest.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	path := "/apis/" + webappv2.SchemeGroupVersion.String()
	err := client.Get().AbsPath(path).Do(ctx).Error()
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		// An older CRD, v1 alone, is not found either: this controller
		// reads v2.
		return fmt.Errorf("the Book CRD (books.%s) is not installed in the cluster at %s, or is one without %s: run `%s`",
			webappv2.GroupName, host, webappv2.SchemeGroupVersion, crdInstallHint)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s rejected our credentials (401 Unauthorized): check the user and token or certificate in your kubeconfig", host)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the API server at %s forbids discovery of %s to our user: grant it the controller's ClusterRole", host, path)
	case isTLSVerification(err):
		return fmt.Errorf("the API server at %s failed TLS verification (%s): check certificate-authority-data (or --master) in your kubeconfig", host, rootCause(err))
	case isUnreachable(err):
		return fmt.Errorf("cannot reach the API server at %s (%s): check --kubeconfig / --master and that the cluster is running", host, rootCause(err))
	default:
		return fmt.Errorf("checking the Book API at %s: %w", host, err)
	}
}

func isTLSVerification(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verification *tls.CertificateVerificationError
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verification)
}

func isUnreachable(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, context.DeadlineExceeded)
}

// rootCause strips the URL and operation wrappers for a shorter message.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// Lease checks that this process can hold the leader-election Lease:
// that its namespace exists and that we may create Leases there. client-go's
// leader elector would retry either failure for ever, logging each attempt,
// while the replica sits idle. The check is a dry-run create, so it writes
// nothing and needs no permission beyond the one leader election needs.
func Lease(ctx context.Context, client coordinationv1client.LeasesGetter, namespace, name string) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	_, err := client.Leases(namespace).Create(ctx, lease, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--leader-elect-namespace %q does not exist: create it, or pass the namespace the controller runs in", namespace)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to hold the Lease %s/%s (%s): bind the controller's leader-election Role in namespace %q, or pass another --leader-elect-namespace",
			namespace, name, apierrors.ReasonForError(err), namespace)
	default:
		return fmt.Errorf("checking the leader-election Lease %s/%s: %w", namespace, name, err)
	}
}
