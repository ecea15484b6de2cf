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
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestBinary walks the binary through a user's first contact: started before
// the CRD exists, it must refuse with the install hint; once the CRD is in,
// it must reconcile, and on SIGTERM it must drain and exit 0; a second
// SIGTERM during the drain must end it at once.
func TestBinary(t *testing.T) {
	kubeconfig := env.Cluster.KubeconfigPath()

	t.Run("without the CRD it exits with the install hint", func(t *testing.T) {
		out, code := framework.RunToExit(t, 30*time.Second, "book-controller", binary, "-kubeconfig="+kubeconfig)
		if code == 0 {
			t.Fatalf("exit code 0, want non-zero")
		}
		assertOneLineError(t, out, "kubectl apply -f manifests/crd.yaml")
	})

	if err := framework.InstallCRD(context.Background(), env.Extensions); err != nil {
		t.Fatal(err)
	}

	t.Run("a second SIGTERM during the drain exits at once", testSecondSignalExitsAtOnce)

	t.Run("reconciles and exits 0 on SIGTERM", func(t *testing.T) {
		ns := env.Namespace(t)
		metricsAddr, probeAddr, pprofAddr := framework.FreeAddr(t), framework.FreeAddr(t), framework.FreeAddr(t)
		proc := framework.StartProcess(t, "book-controller", binary, "-kubeconfig", kubeconfig, "--namespace", ns,
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr, "--pprof-bind-address", pprofAddr)

		if _, err := env.Books.WebappV2().Books(ns).Create(context.Background(),
			framework.NewBook(ns, "book-sample", "kubernetes", 100), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForReady(t, ns, "book-sample", metav1.ConditionTrue, "ConfigMapReady")
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, _, err := framework.HTTPGet(probeAddr, path); err != nil || code != 200 {
				t.Errorf("%s: code %d, err %v", path, code, err)
			}
		}
		if v, err := framework.MetricValue(framework.Scrape(t, metricsAddr), "book_controller_reconcile_total", "result", "success"); err != nil || v < 1 {
			t.Errorf("book_controller_reconcile_total{result=success} = %v (%v), want at least 1", v, err)
		}
		// A heap profile in pprof's format: gzip-compressed protobuf.
		if code, body, err := framework.HTTPGet(pprofAddr, "/debug/pprof/heap"); err != nil || code != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
			t.Errorf("/debug/pprof/heap: code %d, err %v, %d bytes starting %q; want 200 and a gzip-compressed profile", code, err, len(body), body[:min(len(body), 8)])
		}

		if err := proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, err := proc.Wait(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 {
			t.Fatalf("exit code after SIGTERM: %d, want 0", code)
		}
	})
}

// TestBadInputEndsInOneLine covers what users get wrong before the
// controller ever syncs: each case must exit non-zero with one line that
// names the problem, and never a stack trace.
func TestBadInputEndsInOneLine(t *testing.T) {
	dir := t.TempDir()
	badToken := env.EditedKubeconfig(t, dir, "bad-token", func(cfg *clientcmdapi.Config) {
		for _, u := range cfg.AuthInfos {
			u.Token = "not-a-valid-token"
		}
	})
	unreachable := env.EditedKubeconfig(t, dir, "unreachable", func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server = "https://127.0.0.1:1"
		}
	})
	badServer := env.EditedKubeconfig(t, dir, "bad-server", func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server = "ftp://127.0.0.1:6443"
		}
	})
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("this is not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing kubeconfig", []string{"-kubeconfig", filepath.Join(dir, "nope")}, "does not exist"},
		{"malformed kubeconfig", []string{"--kubeconfig", garbage}, "is not usable"},
		{"wrong credentials", []string{"--kubeconfig", badToken}, "401 Unauthorized"},
		{"unreachable server", []string{"--kubeconfig", unreachable}, "cannot reach the API server"},
		{"malformed --master", []string{"--master", "http://[::1"}, `--master "http://[::1" is not a valid API server address`},
		{"--master with another scheme", []string{"--master", "ftp://x", "--kubeconfig", unreachable}, `--master "ftp://x" is not a valid API server address`},
		{"kubeconfig server with another scheme", []string{"--kubeconfig", badServer}, `the kubeconfig's server "ftp://127.0.0.1:6443" is not a valid`},
		{"negative workers", []string{"--workers=-1"}, "--workers must be at least 1"},
		{"bad duration", []string{"--resync-period", "soon"}, "--resync-period"},
		{"unknown flag", []string{"--colour"}, "unknown flag: --colour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := framework.RunToExit(t, 30*time.Second, "book-controller", binary, tc.args...)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero")
			}
			assertOneLineError(t, out, tc.want)
		})
	}
}

// assertOneLineError checks that the last line of the output (stdout and
// stderr) is the error, that it contains want, and that nothing looks like a
// stack trace.
func assertOneLineError(t *testing.T, out, want string) {
	t.Helper()
	if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:") {
		t.Fatalf("stack trace in the output:\n%s", out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "book-controller: error: ") || !strings.Contains(last, want) {
		t.Fatalf("last line %q, want a one-line error containing %q; output:\n%s", last, want, out)
	}
}
