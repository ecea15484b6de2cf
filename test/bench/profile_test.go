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

package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// profileServer answers /debug/pprof/profile with body, and records the
// seconds each request asked for.
func profileServer(status int, body string, seconds *string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/profile" {
			http.NotFound(w, r)
			return
		}
		*seconds = r.URL.Query().Get("seconds")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

func profilingEnv(t *testing.T, apiserver http.Handler) *env {
	t.Helper()
	srv := httptest.NewServer(apiserver)
	t.Cleanup(srv.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{kube: kube, round: 2}
	e.o.profileDir = filepath.Join(t.TempDir(), "profiles")
	e.o.profileFor = 3 * time.Second
	return e
}

// TestProfileWritesBothProfiles: with -profile, a backlog phase leaves the
// API server's and the controller's profiles, each of the asked length,
// even when the controller opens its pprof port only after the profile
// was asked for (it does so a moment after it starts).
func TestProfileWritesBothProfiles(t *testing.T) {
	var apiSecs, ctlSecs string
	e := profilingEnv(t, profileServer(http.StatusOK, "apiserver profile", &apiSecs))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	late := &http.Server{Handler: profileServer(http.StatusOK, "controller profile", &ctlSecs)}
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("reopening %s: %v", addr, err)
			return
		}
		_ = late.Serve(l)
	}()
	t.Cleanup(func() { late.Close() })

	if err := e.startProfile(t.Context(), "ours-backlog", &proc{pprofAddr: addr}).wait(); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"r2-ours-backlog-kube-apiserver.pprof": "apiserver profile",
		"r2-ours-backlog-controller.pprof":     "controller profile",
	} {
		got, err := os.ReadFile(filepath.Join(e.o.profileDir, file))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
	}
	if apiSecs != "3" || ctlSecs != "3" {
		t.Errorf("profiles asked for %q s (API server) and %q s (controller), want 3 each", apiSecs, ctlSecs)
	}
}

// TestProfileFailureNamesWhose: a controller that answers with an error
// fails the phase, and the error says whose profile it was; a controller
// without a pprof port is not asked.
func TestProfileFailureNamesWhose(t *testing.T) {
	var apiSecs, ctlSecs string
	e := profilingEnv(t, profileServer(http.StatusOK, "apiserver profile", &apiSecs))
	ctl := httptest.NewServer(profileServer(http.StatusInternalServerError, "profiling disabled", &ctlSecs))
	t.Cleanup(ctl.Close)
	err := e.startProfile(t.Context(), "v1-backlog", &proc{pprofAddr: strings.TrimPrefix(ctl.URL, "http://")}).wait()
	if err == nil || !strings.Contains(err.Error(), "controller's CPU profile during v1-backlog") || !strings.Contains(err.Error(), "profiling disabled") {
		t.Errorf("wait: %v, want the controller's failure named", err)
	}

	e.o.profileDir = filepath.Join(t.TempDir(), "twin")
	if err := e.startProfile(t.Context(), "twin-tuned-backlog", &proc{}).wait(); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(e.o.profileDir)
	if len(files) != 1 || files[0].Name() != "r2-twin-tuned-backlog-kube-apiserver.pprof" {
		t.Errorf("profiles of a controller without pprof: %v, want the API server's alone", files)
	}
}
