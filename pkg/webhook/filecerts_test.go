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
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestFileCerts serves the pair in the directory, picks up a new one, and
// refuses to start without one.
func TestFileCerts(t *testing.T) {
	dir := t.TempDir()
	write := func() *keyPair {
		t.Helper()
		ca, err := newCA(time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := newServing(ca, time.Now(), time.Hour, []string{"localhost"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.key"), kp.keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), kp.certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return kp
	}
	if _, err := NewFileCerts(t.Context(), dir); err == nil || !strings.Contains(err.Error(), "--webhook-cert-dir") {
		t.Fatalf("an empty directory: err = %v, want one naming --webhook-cert-dir", err)
	}
	first := write()
	f, err := NewFileCerts(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	served := func() *x509.Certificate {
		cert, err := f.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	if !served().Equal(first.cert) {
		t.Fatal("does not serve the directory's certificate")
	}
	second := write()
	// dynamiccertificates re-reads the files on change, and at least once a minute.
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 90*time.Second, true, func(_ context.Context) (bool, error) {
		return served().Equal(second.cert), nil
	}); err != nil {
		t.Fatalf("the new certificate was not served: %v", err)
	}
}
