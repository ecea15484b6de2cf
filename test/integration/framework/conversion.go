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

package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/webhook"
)

// ConversionNamespace holds the Secret of the conversion webhook a test
// environment serves (serveConversion).
const ConversionNamespace = "book-test-conversion"

// serveConversion runs the Book CRD's conversion webhook in the test
// process, on a loopback port, and points the installed CRD at it with its
// CA, as a controller's --webhook-loopback does for `make run`. The API
// server then reads and writes v1 Books of a v2-stored CRD, the tests' and
// its own v1 watch cache's, whichever controller runs or none: the
// controllers the tests start serve no webhook of their own, since the CRD
// names none of theirs (manager.Webhook's converts). It serves until
// Teardown.
func (e *Env) serveConversion(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ConversionNamespace}}
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the namespace %s: %w", ConversionNamespace, err)
	}
	var certs atomic.Pointer[webhook.Certs]
	srv, err := webhook.Listen("127.0.0.1:0", webhook.NewHandler(nil, 0).Mux(), func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return certs.Load().GetCertificate(h)
	}, webhook.DefaultTimeouts)
	if err != nil {
		return fmt.Errorf("the conversion webhook: %w", err)
	}
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	c, err := webhook.NewCerts(webhook.CertConfig{Kube: e.Kube, CRDs: e.Extensions, Namespace: ConversionNamespace,
		LoopbackURL: "https://" + net.JoinHostPort("127.0.0.1", port) + webhook.Path})
	if err != nil {
		_ = srv.Close()
		return err
	}
	certs.Store(c)
	// The webhook lasts as long as the environment, not as Setup's ctx.
	serveCtx, stop := context.WithCancel(context.Background())
	if err := c.Start(serveCtx); err != nil {
		stop()
		_ = srv.Close()
		return fmt.Errorf("the conversion webhook's certificates: %w", err)
	}
	srv.Serve(serveCtx)
	e.stopConversion = func() { stop(); srv.Stop() }
	return poll.Until(ctx, "a v1 list of Books through the conversion webhook", PollInterval, time.Minute, e.V1ListWorks(""))
}
