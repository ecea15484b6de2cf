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
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/test/integration/framework"
)

// testSecondSignalExitsAtOnce: the first SIGTERM starts a drain that waits
// (up to 20 s) for in-flight writes; an operator who sends a second one
// wants out now. A proxy in front of the API server holds the controller's
// ConfigMap creates of two Books, so two writes are in flight when the
// first signal arrives. One is then let through: the Book it belongs to
// becoming Ready proves the process drains rather than exits. The second
// signal then ends it while the other write is still held, never to be let
// through: exit code 1, and no line of a drain that ended or failed (a
// drain that ran out its 20 s would end with one, or with code 0).
func testSecondSignalExitsAtOnce(t *testing.T) {
	ns := env.Namespace(t)
	proxy := newHoldingProxy(t, env.RESTConfig(), func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/configmaps")
	})
	kubeconfig := env.EditedKubeconfig(t, t.TempDir(), "via-proxy", func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server, c.CertificateAuthorityData = proxy.srv.URL, nil
		}
	})

	proc := framework.StartProcess(t, "book-controller", binary, "--kubeconfig", kubeconfig, "--namespace", ns,
		"--workers", "2", "--metrics-bind-address", "0", "--health-probe-bind-address", "0")

	for _, name := range []string{"drained", "held"} {
		if _, err := env.Books.WebappV2().Books(ns).Create(context.Background(),
			framework.NewBook(ns, name, "kubernetes", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, "both ConfigMap creates to be held", func(context.Context) error {
		return poll.Done(proxy.holding("drained") && proxy.holding("held"), "holding %v", proxy.names())
	})

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the first SIGTERM to be announced", func(context.Context) error {
		return poll.Done(proc.CountLines("send another to exit immediately") > 0, "last lines:\n%s", proc.Tail(5))
	})
	proxy.forward("drained")
	env.WaitForReady(t, ns, "drained", metav1.ConditionTrue, "ConfigMapReady")
	if !proxy.holding("held") {
		t.Fatalf("the held write ended before the second signal: %v", proxy.names())
	}

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := proc.Wait(framework.Timeout)
	if err != nil {
		t.Fatalf("second SIGTERM: %v", err)
	}
	if code != 1 {
		t.Errorf("exit code after the second SIGTERM: %d, want 1", code)
	}
	if proc.CountLines("book-controller: error:") != 0 {
		t.Errorf("the process ended its drain instead of exiting on the second signal:\n%s", proc.Tail(5))
	}
}

// holdingProxy forwards to an API server, except that requests matching
// hold wait, each under the name of the object they create, until the test
// forwards them or their client goes away (then they fail with 503).
type holdingProxy struct {
	srv *httptest.Server

	mu   sync.Mutex
	held map[string]chan struct{} // closed to forward
	fwd  map[string]bool
}

func newHoldingProxy(t *testing.T, cfg *rest.Config, hold func(*http.Request) bool) *holdingProxy {
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
	p := &holdingProxy{held: map[string]chan struct{}{}, fwd: map[string]bool{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hold(r) {
			rp.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// JSON or protobuf, as the client chose.
		name := "?"
		if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
			if m, err := meta.Accessor(obj); err == nil {
				name = m.GetName()
			}
		}
		release := p.hold(name)
		defer p.drop(name)
		select {
		case <-release:
			rp.ServeHTTP(w, r)
		case <-r.Context().Done():
			http.Error(w, "held by the test", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *holdingProxy) hold(name string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.fwd[name] {
		close(ch)
	}
	p.held[name] = ch
	return ch
}

func (p *holdingProxy) drop(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, name)
}

// forward lets the held request for name through, and any later one.
func (p *holdingProxy) forward(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fwd[name] = true
	if ch, ok := p.held[name]; ok {
		close(ch)
	}
}

// holding reports whether a request for name is held now.
func (p *holdingProxy) holding(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.held[name]
	return ok
}

func (p *holdingProxy) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.held))
}
