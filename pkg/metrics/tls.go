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
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"
)

// The file names in --metrics-cert-dir: those of a kubernetes.io/tls Secret
// (cert-manager's too), so the Secret can be mounted there as it is.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// ServingTLS is the TLS configuration of the secure metrics endpoint.
//
// With a certDir, it serves tls.crt and tls.key from there and picks up new
// ones when they change (k8s.io/apiserver's dynamiccertificates, which the
// API server uses for its own serving certificate), so a rotated Secret
// needs no restart. Without one, it generates a self-signed certificate, as
// controller-runtime and kube-controller-manager do for their metrics: it
// encrypts the bearer token on the wire; the caller authenticates the
// server by other means (or not: Prometheus's insecureSkipVerify). That
// certificate lives as long as the process (valid a year), so a restart
// rotates it. Watching the files stops when ctx ends.
func ServingTLS(ctx context.Context, certDir string) (*tls.Config, error) {
	var content dynamiccertificates.CertKeyContentProvider
	if certDir == "" {
		cert, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
		if err != nil {
			return nil, fmt.Errorf("generating a self-signed certificate for the metrics endpoint: %w", err)
		}
		if content, err = dynamiccertificates.NewStaticCertKeyContent("self-signed-metrics-serving-cert", cert, key); err != nil {
			return nil, fmt.Errorf("loading the self-signed metrics certificate: %w", err)
		}
	} else {
		files, err := dynamiccertificates.NewDynamicServingContentFromFiles("metrics-serving-cert",
			filepath.Join(certDir, CertFile), filepath.Join(certDir, KeyFile))
		if err != nil {
			return nil, fmt.Errorf("--metrics-cert-dir %q: %v: put a certificate and its key there as %s and %s (a mounted kubernetes.io/tls Secret), or leave the flag empty for a self-signed certificate",
				certDir, err, CertFile, KeyFile)
		}
		go files.Run(ctx, 1)
		content = files
	}

	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only, as kubebuilder's scaffold: a scrape gains nothing
		// from HTTP/2, which had the stream-reset CVEs (CVE-2023-44487).
		NextProtos: []string{"http/1.1"},
	}
	ctrl := dynamiccertificates.NewDynamicServingCertificateController(base, nil, content, nil, nil)
	content.AddListener(ctrl)
	if err := ctrl.RunOnce(); err != nil {
		return nil, fmt.Errorf("loading the metrics serving certificate: %w", err)
	}
	go ctrl.Run(1, ctx.Done())
	return &tls.Config{
		MinVersion:         base.MinVersion,
		NextProtos:         base.NextProtos,
		GetConfigForClient: ctrl.GetConfigForClient,
	}, nil
}
