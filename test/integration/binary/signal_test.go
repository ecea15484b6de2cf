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

package binary_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"ydzs.io/book-controller/test/integration/framework"
)

// testSecondSignalExitsAtOnce: the first SIGTERM starts a drain that waits
// (up to 20 s) for in-flight writes; an operator who sends a second one
// wants out now. A proxy in front of the API server holds the controller's
// ConfigMap create, so a write is in flight when the signals arrive.
func testSecondSignalExitsAtOnce(t *testing.T) {
	ns := env.Namespace(t)
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	proxy := holdingProxy(t, env.RESTConfig(), func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/configmaps")
	}, held, release)
	kubeconfig := env.EditedKubeconfig(t, t.TempDir(), "via-proxy", func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server, c.CertificateAuthorityData = proxy.URL, nil
		}
	})

	proc := framework.StartProcess(t, "book-controller", binary, "--kubeconfig", kubeconfig, "--namespace", ns,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")

	if _, err := env.Books.WebappV1().Books(ns).Create(context.Background(),
		framework.NewBook(ns, "held", "kubernetes", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(framework.Timeout):
		t.Fatal("the controller never tried to create the ConfigMap")
	}

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(time.Second); err == nil {
		t.Fatalf("exited (code %d) on the first SIGTERM with a write in flight; want a drain", code)
	}

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := proc.Wait(3 * time.Second)
	if err != nil {
		t.Fatalf("second SIGTERM: %v", err)
	}
	if code != 1 {
		t.Errorf("exit code after the second SIGTERM: %d, want 1", code)
	}
	if proc.CountLines("send another to exit immediately") == 0 {
		t.Error("the first SIGTERM was not announced")
	}
}

// holdingProxy forwards to the API server of cfg, except that requests
// matching hold wait until release is closed (then fail with 503); held
// receives a value when the first one arrives.
func holdingProxy(t *testing.T, cfg *rest.Config, hold func(*http.Request) bool, held chan<- struct{}, release <-chan struct{}) *httptest.Server {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hold(r) {
			rp.ServeHTTP(w, r)
			return
		}
		select {
		case held <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "held by the test", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv
}
