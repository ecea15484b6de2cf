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

package controller_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/test/integration/framework"
)

// metricsReaderRole is the ClusterRole of manifests/rbac/metrics_reader_role.yaml,
// applied with the controller's identity by ControllerServiceAccountConfig.
const metricsReaderRole = "book-controller-metrics-reader"

// TestSecureMetrics runs the controller with --metrics-secure and its
// ServiceAccount's permissions from manifests/, and scrapes it with real
// ServiceAccount tokens from the TokenRequest API: only a token the API
// server accepts, of a user bound to the metrics-reader ClusterRole, gets
// the metrics; they are the ones plain HTTP serves; and the API server's
// answers are cached, so repeated scrapes cost no further reviews.
func TestSecureMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, plainNS := env.Namespace(t), env.Namespace(t)

	// The controller's own credentials, its requests counted.
	requests := &framework.RequestCounter{}
	cfg := requests.Wrap(env.ControllerServiceAccountConfig(t))

	readerToken := env.ServiceAccountToken(t, ns, "scraper")
	env.BindClusterRole(t, metricsReaderRole, ns, "scraper", "get", "/metrics")
	strangerToken := env.ServiceAccountToken(t, ns, "stranger")

	secureAddr, plainAddr := framework.FreeAddr(t), framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, RESTConfig: cfg, MetricsAddr: secureAddr, MetricsSecure: true})
	env.StartController(t, framework.ControllerOptions{Namespace: plainNS, MetricsAddr: plainAddr})
	for _, n := range []string{ns, plainNS} {
		if _, err := env.Books.WebappV2().Books(n).Create(ctx, framework.NewBook(n, "b", "t", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForReady(t, n, "b", metav1.ConditionTrue, "ConfigMapReady")
	}

	framework.Eventually(t, "the secure metrics endpoint to answer the scraper 200",
		framework.AnswersOKOverTLS(secureAddr, "/metrics", readerToken, nil))

	t.Run("the body is what plain HTTP serves", func(t *testing.T) {
		code, body, err := framework.HTTPSGet(secureAddr, "/metrics", readerToken, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("scrape: %d %v", code, err)
		}
		secure, err := framework.ParseMetrics(body)
		if err != nil {
			t.Fatalf("parsing the HTTPS scrape: %v", err)
		}
		plain := framework.Scrape(t, plainAddr)
		if got, want := familyIDs(secure), familyIDs(plain); !slices.Equal(got, want) {
			t.Errorf("metric families over HTTPS differ from plain HTTP:\n  https %q\n  http  %q", got, want)
		}
		if v, _ := framework.MetricValue(secure, "book_controller_cached_books"); v != 1 {
			t.Errorf("book_controller_cached_books = %v over HTTPS, want 1 (its own manager's)", v)
		}
	})

	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"no token: 401", "", http.StatusUnauthorized},
		{"a token the API server never issued: 401", "not-a-token", http.StatusUnauthorized},
		{"a valid token without the role: 403", strangerToken, http.StatusForbidden},
		{"a valid token with the role: 200", readerToken, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, b, err := framework.HTTPSGet(secureAddr, "/metrics", c.token, nil)
			if err != nil {
				t.Fatal(err)
			}
			if code != c.want {
				t.Errorf("GET /metrics: %d %q, want %d", code, firstLine(b), c.want)
			}
			if c.want != http.StatusOK && strings.Contains(b, "workqueue_depth") {
				t.Errorf("a %d answer carries metrics", code)
			}
		})
	}

	t.Run("plain HTTP to the HTTPS port gets no metrics", func(t *testing.T) {
		code, b, err := framework.HTTPGet(secureAddr, "/metrics")
		if err == nil && (code == http.StatusOK || strings.Contains(b, "workqueue_depth")) {
			t.Errorf("plain GET /metrics on the secure port: %d %q", code, firstLine(b))
		}
	})

	t.Run("answers are cached", func(t *testing.T) {
		before := reviews(requests.Requests())
		for range 5 {
			if code, b, err := framework.HTTPSGet(secureAddr, "/metrics", readerToken, nil); err != nil || code != http.StatusOK {
				t.Fatalf("scrape: %d %q %v", code, firstLine(b), err)
			}
			if code, _, _ := framework.HTTPSGet(secureAddr, "/metrics", strangerToken, nil); code != http.StatusForbidden {
				t.Fatalf("stranger's scrape: %d, want 403", code)
			}
		}
		after := reviews(requests.Requests())
		// Within TokenCacheTTL (1 min) and DenyCacheTTL (30 s) of the
		// first answers above, which a loaded machine stays well inside.
		if after != before {
			t.Errorf("10 more scrapes by two known users cost %v TokenReviews/SubjectAccessReviews (before %v), want none: answers are not cached", after, before)
		}
		if before.tokenReviews == 0 || before.accessReviews == 0 {
			t.Errorf("the controller made %v: the answers did not come from the API server through its own client", before)
		}
	})
}

// TestSecureMetricsCertDir: with --metrics-cert-dir the endpoint serves the
// certificate found there, which a client can verify, and picks up a new one
// written over it without a restart.
func TestSecureMetricsCertDir(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	token := env.ServiceAccountToken(t, ns, "scraper")
	env.BindClusterRole(t, metricsReaderRole, ns, "scraper", "get", "/metrics")

	dir := t.TempDir()
	first := writeServingCert(t, dir)
	addr := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: addr, MetricsSecure: true, MetricsCertDir: dir})

	framework.Eventually(t, "a verified scrape with the first certificate's CA",
		framework.AnswersOKOverTLS(addr, "/metrics", token, first.roots))
	if got := servedSerial(t, addr); got != first.serial {
		t.Fatalf("served certificate serial %s, want the one in %s (%s)", got, dir, first.serial)
	}

	second := writeServingCert(t, dir)
	framework.Eventually(t, "the rewritten certificate to be served", func(context.Context) error {
		got := servedSerial(t, addr)
		return poll.Done(got == second.serial, "serial %s served", got)
	})
	if code, b, err := framework.HTTPSGet(addr, "/metrics", token, second.roots); err != nil || code != http.StatusOK {
		t.Errorf("verified scrape with the new certificate: %d %q %v", code, firstLine(b), err)
	}
}

type servingCert struct {
	roots  *x509.CertPool
	serial string
}

// writeServingCert writes a fresh certificate for 127.0.0.1 with its own CA
// into dir as tls.crt and tls.key, the key first so that the pair on disk
// matches once the certificate lands.
func writeServingCert(t *testing.T, dir string) servingCert {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"tls.key", keyPEM}, {"tls.crt", certPEM}} {
		tmp := filepath.Join(dir, "."+f.name)
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("no certificate in the generated PEM")
	}
	block, _ := pem.Decode(certPEM) // the serving certificate comes first, its CA after
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return servingCert{roots: roots, serial: leaf.SerialNumber.String()}
}

// servedSerial is the serial number of the certificate addr presents.
func servedSerial(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return fmt.Sprintf("(dial: %v)", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

type reviewCount struct{ tokenReviews, accessReviews int }

func reviews(reqs []framework.Request) reviewCount {
	var c reviewCount
	for _, r := range reqs {
		switch {
		case strings.HasSuffix(r.Path, "/tokenreviews"):
			c.tokenReviews++
		case strings.HasSuffix(r.Path, "/subjectaccessreviews"):
			c.accessReviews++
		}
	}
	return c
}

// familyIDs lists "name type" of each metric family, sorted.
func familyIDs(families map[string]*dto.MetricFamily) []string {
	var ids []string
	for name, mf := range families {
		ids = append(ids, name+" "+mf.GetType().String())
	}
	slices.Sort(ids)
	return ids
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
