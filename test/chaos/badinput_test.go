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
	"net"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestBadCommandLine extends test/integration/binary's
// TestBadInputEndsInOneLine with what it leaves out: a server certificate
// the kubeconfig does not trust, leader-election timings that can't work,
// non-numeric and out-of-range numbers, and a port already taken. Each must
// end the process with a non-zero code and one line on stderr naming the
// flag or file at fault (and, where there is one, the fix), never a stack
// trace. Cases that fail before contacting the server must print nothing
// but that line.
func TestBadCommandLine(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := env.Cluster.KubeconfigPath()
	untrusted := env.EditedKubeconfig(t, dir, "untrusted", func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.CertificateAuthorityData, c.CertificateAuthority = nil, ""
		}
	})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	cases := []struct {
		name     string
		args     []string
		want     []string // substrings of the last line
		onlyLine bool     // fails before any request: nothing else printed
	}{
		{"server certificate not trusted", []string{"--kubeconfig", untrusted},
			[]string{"failed TLS verification", "certificate-authority-data"}, false},
		{"lease not longer than renew deadline", []string{"--leader-elect", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=5s"},
			[]string{"--leader-elect-lease-duration (5s) must be longer than --leader-elect-renew-deadline (5s)"}, true},
		{"renew deadline within jitter of retry period", []string{"--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=2s"},
			[]string{"--leader-elect-renew-deadline (2s) must be longer than 1.2 x --leader-elect-retry-period (2s)"}, true},
		{"zero retry period", []string{"--leader-elect-retry-period=0s"},
			[]string{"--leader-elect-retry-period must be positive"}, true},
		{"negative lease duration", []string{"--leader-elect-lease-duration=-15s"},
			[]string{"--leader-elect-lease-duration (-15s) must be longer than"}, true},
		{"lease duration not a duration", []string{"--leader-elect-lease-duration", "15"},
			[]string{`"15" for "--leader-elect-lease-duration"`, "--help"}, true},
		{"empty lease name", []string{"--leader-elect-id="},
			[]string{"--leader-elect-id must not be empty"}, true},
		{"non-numeric workers", []string{"--workers", "many"},
			[]string{`"many" for "--workers"`, "--help"}, true},
		{"zero workers", []string{"-workers=0"},
			[]string{"--workers must be at least 1, got 0"}, true},
		{"negative qps", []string{"--kube-api-qps=-5"},
			[]string{"--kube-api-qps must be positive, or -1 to disable client-side rate limiting; got -5"}, true},
		{"non-numeric qps", []string{"--kube-api-qps=fast"},
			[]string{`"fast" for "--kube-api-qps"`, "--help"}, true},
		{"zero burst", []string{"--kube-api-burst=0"},
			[]string{"--kube-api-burst must be at least 1, got 0"}, true},
		{"namespace too long", []string{"--namespace", strings.Repeat("n", 64)},
			[]string{"is longer than 63 characters"}, true},
		{"stray argument", []string{"--kubeconfig", kubeconfig, "run"},
			[]string{`unexpected argument "run"`, "--help"}, true},
		{"metrics port taken", []string{"--kubeconfig", kubeconfig, "--metrics-bind-address", taken.Addr().String(), "--health-probe-bind-address=0"},
			[]string{"--metrics-bind-address", "address already in use", `"0" to turn it off`}, false},
		{"probe address malformed", []string{"--kubeconfig", kubeconfig, "--health-probe-bind-address", "nonsense"},
			[]string{"--health-probe-bind-address", "nonsense"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := framework.RunToExit(t, 30*time.Second, "book-controller", binary, tc.args...)
			if code == 0 {
				t.Errorf("exit code 0, want non-zero")
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:") {
				t.Fatalf("stack trace:\n%s", out)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "book-controller: error: ") {
				t.Fatalf("last line %q is not a one-line error; output:\n%s", last, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q does not contain %q", last, w)
				}
			}
			if tc.onlyLine && len(lines) != 1 {
				t.Errorf("%d lines of output, want only the error:\n%s", len(lines), out)
			}
			t.Logf("exit %d: %s", code, last)
		})
	}
}
