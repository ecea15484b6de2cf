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

package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The node's certificates. The API server reaches the kubelet over HTTPS for
// logs, exec and port-forward: it verifies the kubelet's serving certificate
// (for 127.0.0.1, the node's only address) with the node CA, and presents a
// client certificate from the same CA, whose group system:masters the
// kubelet's webhook authorizer lets do everything.
const (
	nodeCACert          = "ca.crt"
	kubeletServingCert  = "kubelet.crt"
	kubeletServingKey   = "kubelet.key"
	apiServerClientCert = "apiserver-kubelet-client.crt"
	apiServerClientKey  = "apiserver-kubelet-client.key"
)

func (c *Cluster) nodePKI(name string) string { return c.path(nodeDir, "pki", name) }

// writeNodePKI creates the node CA and the two leaf certificates, unless a
// previous Start on the same Dir did: a restarted API server keeps trusting
// the running kubelet.
func (c *Cluster) writeNodePKI() error {
	if _, err := os.Stat(c.nodePKI(apiServerClientKey)); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(c.nodePKI(nodeCACert)), 0o700); err != nil {
		return err
	}
	caKey, caCert, err := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "localcluster-node-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return err
	}
	if err := writePEM(c.nodePKI(nodeCACert), "CERTIFICATE", caCert.Raw); err != nil {
		return err
	}
	if err := c.writeLeaf(kubeletServingCert, kubeletServingKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeName},
		IPAddresses: []net.IP{net.ParseIP(nodeName)},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey); err != nil {
		return err
	}
	return c.writeLeaf(apiServerClientCert, apiServerClientKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
}

func (c *Cluster) writeLeaf(certName, keyName string, tmpl, ca *x509.Certificate, caKey crypto.Signer) error {
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	key, cert, err := newCert(tmpl, ca, caKey)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(c.nodePKI(keyName), "PRIVATE KEY", der); err != nil {
		return err
	}
	return writePEM(c.nodePKI(certName), "CERTIFICATE", cert.Raw)
}

// newCert signs tmpl with parent's key, or self-signs it when parent is nil.
func newCert(tmpl, parent *x509.Certificate, parentKey crypto.Signer) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("localcluster: generating a node key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("localcluster: signing %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
