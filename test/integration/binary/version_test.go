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
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestVersion: the binary, built as make build builds it, says which version
// and commit it is, as hack/version.sh computes them from git, and exits 0;
// its requests carry the same version in their user agent, which the API
// server's audit log records.
func TestVersion(t *testing.T) {
	version, err := framework.VersionScript()
	if err != nil {
		t.Fatal(err)
	}
	commit, err := framework.VersionScript("--commit")
	if err != nil {
		t.Fatal(err)
	}
	if version == "" || commit == "" || commit == "unknown" {
		t.Fatalf("hack/version.sh says version %q, commit %q: run the test in a git checkout", version, commit)
	}

	out, code := framework.RunToExit(t, 30*time.Second, "book-controller", binary, "--version")
	want := fmt.Sprintf("book-controller %s (commit %s, built with %s)\n", version, commit, runtime.Version())
	if code != 0 || out != want {
		t.Fatalf("book-controller --version: exit code %d, output %q; want 0 and %q", code, out, want)
	}

	ctx := context.Background()
	if err := framework.InstallCRD(ctx, env.Extensions); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	framework.StartProcess(t, "book-controller", binary, "--kubeconfig", env.Cluster.KubeconfigPath(), "--namespace", ns,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "versioned", "Versions", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "versioned", metav1.ConditionTrue, "ConfigMapReady")
	agent := "book-controller/" + version + " ("
	var agents []string
	for _, e := range env.AuditLog(t) {
		if ref := e.ObjectRef; ref != nil && ref.Namespace == ns && ref.Name == "versioned" && ref.Resource == "configmaps" && e.Verb == "create" {
			agents = append(agents, e.UserAgent)
		}
	}
	if len(agents) == 0 {
		t.Fatalf("the audit log holds no create of ConfigMap %s/versioned", ns)
	}
	for _, a := range agents {
		if !strings.HasPrefix(a, agent) {
			t.Errorf("the ConfigMap was created with the user agent %q, want %q…", a, agent)
		}
	}
}
