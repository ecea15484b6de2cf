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

package preflight

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// bookAPIPath is where BookAPI must look for the Book API.
var bookAPIPath = "/apis/" + webappv2.SchemeGroupVersion.String()

// discoveryClient is the client manager.Run hands to BookAPI, for host.
func discoveryClient(t *testing.T, host string) rest.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig(%s): %v", host, err)
	}
	return cs.Discovery().RESTClient()
}

// server answers GETs of the Book API with h and fails the test on any
// other request.
func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != bookAPIPath {
			t.Errorf("unexpected request %s %s, want GET %s", r.Method, r.URL.Path, bookAPIPath)
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func status(code int, reason metav1.StatusReason, message string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(&metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure,
			Code:     int32(code),
			Reason:   reason,
			Message:  message,
		})
	}
}

func plain(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, body, code)
	}
}

func TestPreflight(t *testing.T) {
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    []string // substrings of the error; nil: no error
	}{
		{
			name: "Book API served",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{
					TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
					GroupVersion: webappv2.SchemeGroupVersion.String(),
					APIResources: []metav1.APIResource{
						{Name: "books", SingularName: "book", Namespaced: true, Kind: "Book", ShortNames: []string{"bk"},
							Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}},
						{Name: "books/status", Namespaced: true, Kind: "Book", Verbs: metav1.Verbs{"get", "patch", "update"}},
					},
				})
			},
		},
		{
			// What kube-apiserver answers for a group it does not serve.
			name:    "CRD missing, plain 404",
			handler: plain(http.StatusNotFound, "404 page not found"),
			want:    []string{"not installed", "books." + webappv2.GroupName, crdInstallHint, "kubectl apply -f manifests/crd.yaml"},
		},
		{
			name:    "CRD missing, Status 404",
			handler: status(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"),
			want:    []string{"not installed", "kubectl apply -f manifests/crd.yaml"},
		},
		{
			name:    "401",
			handler: status(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized"),
			want:    []string{"rejected our credentials", "401 Unauthorized", "kubeconfig"},
		},
		{
			name:    "401 without a Status body",
			handler: plain(http.StatusUnauthorized, "Unauthorized"),
			want:    []string{"rejected our credentials", "401 Unauthorized"},
		},
		{
			name: "403",
			handler: status(http.StatusForbidden, metav1.StatusReasonForbidden,
				`forbidden: User "system:anonymous" cannot get path "`+bookAPIPath+`"`),
			want: []string{"forbids discovery of " + bookAPIPath, "ClusterRole"},
		},
		{
			name:    "500",
			handler: status(http.StatusInternalServerError, metav1.StatusReasonInternalError, "etcd is sad"),
			want:    []string{"checking the Book API", "etcd is sad"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := server(t, c.handler)
			err := BookAPI(context.Background(), srv.URL, discoveryClient(t, srv.URL))
			checkPreflightError(t, err, srv.URL, c.want)
		})
	}
}

func TestPreflightClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = BookAPI(context.Background(), host, discoveryClient(t, host))
	checkPreflightError(t, err, host, []string{"cannot reach the API server", "connection refused", "--kubeconfig"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("BookAPI took %v to notice a closed port", d)
	}
}

// A server that accepts the connection and never answers: BookAPI gives up
// when the context does and says it cannot reach the server.
func TestPreflightHangingServer(t *testing.T) {
	release := make(chan struct{})
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release) // before srv.Close, which waits for the handler
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := BookAPI(ctx, srv.URL, discoveryClient(t, srv.URL))
	checkPreflightError(t, err, srv.URL, []string{"cannot reach the API server", "deadline exceeded"})
}

func checkPreflightError(t *testing.T, err error, host string, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("BookAPI: unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("BookAPI = nil, want an error mentioning %q", want)
	}
	msg := err.Error()
	for _, w := range append(want, host) {
		if !strings.Contains(msg, w) {
			t.Errorf("BookAPI error does not mention %q:\n  %s", w, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("BookAPI error spans several lines, want one sentence:\n%s", msg)
	}
}
