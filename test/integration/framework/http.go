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

package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/localcluster"
)

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a metrics or probe endpoint.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addrs, err := FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

// FreeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago (localcluster.FreePorts), for programs that are not tests,
// such as the benchmark.
func FreeAddrs(n int) ([]string, error) {
	ports, err := localcluster.FreePorts(n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

// HTTPGet returns the status code and body of GET http://addr+path, or an
// error if the endpoint can't be reached.
func HTTPGet(addr, path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Readyz is a check that the /readyz on probe (a --health-probe-bind-address)
// answers 200.
func Readyz(probe string) poll.Check {
	return func(context.Context) error {
		code, body, err := HTTPGet(probe, "/readyz")
		return poll.Done(err == nil && code == http.StatusOK, "/readyz: %d %q %v", code, body, err)
	}
}

// HTTPSGet is HTTPGet over TLS with a bearer token (none when empty). The
// server's certificate is checked against roots, or not at all when roots is
// nil (a self-signed certificate nobody can verify).
func HTTPSGet(addr, path, token string, roots *x509.CertPool) (int, string, error) {
	return HTTPSGetVia(nil, addr, path, token, roots)
}

// HTTPSGetVia is HTTPSGet with the connection made by dial (nil: the
// ordinary dialer).
// The e2e tests reach a pod from inside the node's network namespace // fork:line node
// with localcluster.DialNode. // fork:line node
func HTTPSGetVia(dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, path, token string, roots *x509.CertPool) (int, string, error) {
	tlsConfig := &tls.Config{RootCAs: roots, InsecureSkipVerify: roots == nil}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DialContext: dial}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// AnswersOK is a check that GET http://addr+path answers 200.
func AnswersOK(addr, path string) poll.Check {
	return func(context.Context) error { return answeredOK(HTTPGet(addr, path)) }
}

// AnswersOKOverTLS is AnswersOK over TLS with a bearer token, the server's
// certificate checked as HTTPSGet does.
func AnswersOKOverTLS(addr, path, token string, roots *x509.CertPool) poll.Check {
	return func(context.Context) error { return answeredOK(HTTPSGet(addr, path, token, roots)) }
}

func answeredOK(code int, body string, err error) error {
	switch {
	case err != nil:
		return err
	case code != http.StatusOK:
		first, _, _ := strings.Cut(body, "\n")
		return fmt.Errorf("code %d: %s", code, first)
	}
	return nil
}

// Scrape fetches /metrics from addr and parses the Prometheus text format.
func Scrape(t testing.TB, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := ScrapeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// ScrapeMetrics fetches /metrics from addr and parses the Prometheus text
// format, for programs that are not tests.
func ScrapeMetrics(addr string) (map[string]*dto.MetricFamily, error) {
	code, body, err := HTTPGet(addr, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: %w", addr, err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: code %d", addr, code)
	}
	families, err := ParseMetrics(body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s/metrics: %w", addr, err)
	}
	return families, nil
}

// ParseMetrics parses a /metrics body in the Prometheus text format.
func ParseMetrics(body string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
}

// MetricSumBy sums a counter or gauge by the value of one label, e.g.
// rest_client_requests_total by method.
func MetricSumBy(families map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				out[lp.GetValue()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// MetricValue sums the samples of a counter, gauge or histogram (its count)
// whose labels include all of the given ones.
func MetricValue(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, error) {
	mf, ok := families[name]
	if !ok {
		return 0, fmt.Errorf("metric %s not exported", name)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	sum := 0.0
	for _, m := range mf.GetMetric() {
		matched := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				matched++
			}
		}
		if matched != len(want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, nil
}
