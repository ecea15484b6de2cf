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

package manager

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// fakeAPIServer answers the Book API's discovery with bookAPI and a Lease
// dry-run create with lease; anything else is a test failure.
func fakeAPIServer(t *testing.T, bookAPI, lease http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == bookAPIPath:
			bookAPI(w, r)
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/v1/namespaces/"):
			lease(w, r)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// bookAPIPath is where the preflight looks for the Book API.
var bookAPIPath = "/apis/" + webappv2.SchemeGroupVersion.String()

// status answers with an API error, as the API server does.
func status(code int, reason metav1.StatusReason, message string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(&metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
		})
	}
}

// TestRunLeavesNoGoroutineOnEarlyReturn: every way Run can fail or stop
// while starting must stop what it started: the Event broadcaster, the
// controller's work queue (whose goroutines controller.New starts), the
// clients' connections.
func TestRunLeavesNoGoroutineOnEarlyReturn(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	le := LeaderElection{Enabled: true, Namespace: "ns", ID: "lease", Identity: "me"}

	cases := []struct {
		name        string
		bookAPI     http.HandlerFunc
		lease       http.HandlerFunc
		cfg         Config
		cancelFirst bool
		want        string // "" for a clean stop
	}{
		{name: "probe port taken", bookAPI: ok, cfg: Config{ProbeAddr: taken.Addr().String()},
			want: "--health-probe-bind-address"},
		{name: "metrics port taken, leader election", bookAPI: ok, lease: status(http.StatusConflict, "AlreadyExists", "exists"),
			cfg: Config{MetricsAddr: taken.Addr().String(), LeaderElection: le}, want: "--metrics-bind-address"},
		{name: "CRD missing", bookAPI: status(http.StatusNotFound, "NotFound", "no"), want: "is not installed"},
		{name: "Lease namespace missing", bookAPI: ok, lease: status(http.StatusNotFound, "NotFound", "no"),
			cfg: Config{LeaderElection: le}, want: "does not exist"},
		{name: "stopped while starting", bookAPI: ok, cancelFirst: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeAPIServer(t, tc.bookAPI, tc.lease)
			ignore := goleak.IgnoreCurrent()
			cfg := tc.cfg
			cfg.RESTConfig = &rest.Config{Host: srv.URL}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if tc.cancelFirst {
				cancel()
			}
			err := Run(ctx, cfg)
			cancel()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Run: got %v, want a clean stop", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Run: got %v, want an error containing %q", err, tc.want)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}
