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
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// FileCerts serves tls.crt and tls.key from a directory (a mounted
// kubernetes.io/tls Secret, cert-manager's), picking up new ones when they
// change. With it the webhook manages neither Secret nor CRD: cert-manager's
// CA injector fills in the caBundle.
type FileCerts struct {
	content *dynamiccertificates.DynamicCertKeyPairContent
	mu      sync.Mutex
	certPEM []byte
	cert    *tls.Certificate
}

// NewFileCerts reads dir's files now (a missing or bad pair fails the
// start) and watches them until ctx ends.
func NewFileCerts(ctx context.Context, dir string) (*FileCerts, error) {
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles("webhook-serving-cert",
		filepath.Join(dir, corev1.TLSCertKey), filepath.Join(dir, corev1.TLSPrivateKeyKey))
	if err != nil {
		return nil, fmt.Errorf("--webhook-cert-dir %q: %v: mount a kubernetes.io/tls Secret there (%s, %s)", dir, err, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	f := &FileCerts{content: content}
	if _, err := f.GetCertificate(nil); err != nil {
		return nil, fmt.Errorf("--webhook-cert-dir %q: %w", dir, err)
	}
	go content.Run(ctx, 1)
	return f, nil
}

// GetCertificate is tls.Config's: the files' pair, parsed when it changed.
func (f *FileCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPEM, keyPEM := f.content.CurrentCertKeyContent()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cert != nil && bytes.Equal(certPEM, f.certPEM) {
		return f.cert, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the serving certificate and key: %w", err)
	}
	f.cert, f.certPEM = &cert, certPEM
	return f.cert, nil
}
