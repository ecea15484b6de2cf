//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"

	"ydzs.io/book-controller/test/integration/framework"
)

// Helpers of the tests of faults the cluster itself throws while its API
// server is up and answering (issue 27): throttling (throttle_test.go), a
// full etcd (nospace_test.go), expired watches (expiredwatch_test.go).

// ownControlPlane starts a control plane for this test alone, with extra
// kube-apiserver and etcd flags, and tears it down at the end of the test
// (after the test's controller, whose cleanup is registered later and so
// runs first).
func ownControlPlane(t *testing.T, apiServerArgs, etcdArgs []string) *framework.Env {
	t.Helper()
	start := time.Now()
	e, err := framework.SetupWith(framework.SetupOptions{InstallCRD: true, APIServerArgs: apiServerArgs, EtcdArgs: etcdArgs})
	if err != nil {
		t.Fatalf("starting a control plane of the test's own (kube-apiserver %q, etcd %q): %v", apiServerArgs, etcdArgs, err)
	}
	t.Cleanup(e.Teardown)
	t.Logf("own control plane (kube-apiserver %q, etcd %q) up in %v", apiServerArgs, etcdArgs, time.Since(start).Round(100*time.Millisecond))
	return e
}

// apiServerMetrics scrapes the API server's /metrics as the cluster admin.
func apiServerMetrics(t *testing.T, e *framework.Env) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("scraping the API server's /metrics: %v", err)
	}
	families, err := framework.ParseMetrics(string(body))
	if err != nil {
		t.Fatalf("parsing the API server's /metrics: %v", err)
	}
	return families
}

// metricOf is framework.MetricValue that fails the test when the metric is
// not exported; absent samples of an exported metric sum to 0.
func metricOf(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, err := framework.MetricValue(families, name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// optionalMetric is framework.MetricValue with 0 for a metric not exported
// (yet): a counter the API server registers on its first increment.
func optionalMetric(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	v, err := framework.MetricValue(families, name, labels...)
	if err != nil {
		return 0
	}
	return v
}

// serviceAccountOfConfig returns the namespace and name of the
// ServiceAccount a framework configuration impersonates.
func serviceAccountOfConfig(t *testing.T, cfg *rest.Config) (namespace, name string) {
	t.Helper()
	parts := strings.Split(cfg.Impersonate.UserName, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		t.Fatalf("the controller's configuration impersonates %q, not a ServiceAccount", cfg.Impersonate.UserName)
	}
	return parts[2], parts[3]
}

// writesByCode counts audit-logged writes by response code.
func writesByCode(writes []framework.AuditWrite) map[int32]int {
	out := map[int32]int{}
	for _, w := range writes {
		out[w.Code]++
	}
	return out
}

// writesBetween returns the writes received in [from, to].
func writesBetween(writes []framework.AuditWrite, from, to time.Time) []framework.AuditWrite {
	var out []framework.AuditWrite
	for _, w := range writes {
		if !w.At.Before(from) && !w.At.After(to) {
			out = append(out, w)
		}
	}
	return out
}

// writesOf returns the writes of one resource ("configmaps", "books/status",
// "events").
func writesOf(writes []framework.AuditWrite, resource string) []framework.AuditWrite {
	var out []framework.AuditWrite
	for _, w := range writes {
		if w.Resource == resource {
			out = append(out, w)
		}
	}
	return out
}

// describeCodes is "201×300, 500×12" for a count by code.
func describeCodes(byCode map[int32]int) string {
	var parts []string
	for _, c := range []int32{200, 201, 409, 429, 500, 503, 504} {
		if n := byCode[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", c, n))
		}
	}
	for c, n := range byCode {
		switch c {
		case 200, 201, 409, 429, 500, 503, 504:
		default:
			parts = append(parts, fmt.Sprintf("%d×%d", c, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// roundTripper is an http.RoundTripper made of a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
