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
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ydzs.io/book-controller/pkg/localcluster"
)

// TestLocalUpScript drives hack/local-up.sh as a developer would, in a
// temporary LOCAL_CLUSTER_DIR so that it cannot touch a cluster the
// developer runs in _output/local-cluster.
func TestLocalUpScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a detached control plane (and may build it first); skipped in -short mode")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	script := func(arg string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack/local-up.sh"), arg)
		cmd.Env = append(os.Environ(), "LOCAL_CLUSTER_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("local-up.sh %s: %v", arg, err)
		}
		t.Logf("local-up.sh %s (exit %d):\n%s", arg, code, out.String())
		return out.String(), code
	}
	// Whatever fails, leave no detached process behind.
	t.Cleanup(func() {
		if c, err := localcluster.Attach(dir); err == nil && len(c.Pids()) > 0 {
			_ = c.Stop()
		}
	})

	out, code := script("up")
	if code != 0 || !strings.Contains(out, "export KUBECONFIG="+filepath.Join(dir, "kubeconfig")) {
		t.Fatalf("up: exit %d, want 0 and usage with export KUBECONFIG", code)
	}
	c, err := localcluster.Attach(dir)
	if err != nil {
		t.Fatal(err)
	}
	pids := c.Pids()
	if len(pids) != 3 {
		t.Fatalf("after up, running: %v; want etcd, kube-apiserver, kube-controller-manager", pids)
	}

	// The cluster needs no kubectl; this test does (make test builds it first).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	binDir, err := localcluster.EnsureBinaries(ctx, root, localcluster.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := exec.Command(filepath.Join(binDir, localcluster.Kubectl), "get", "ns")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	nsOut, err := kubectl.CombinedOutput()
	if err != nil || !strings.Contains(string(nsOut), "kube-system") {
		t.Fatalf("kubectl get ns: %v\n%s", err, nsOut)
	}
	t.Logf("kubectl get ns:\n%s", nsOut)

	if out, code := script("up"); code != 0 || !strings.Contains(out, "already running") {
		t.Fatalf("second up: exit %d, want 0 and 'already running'", code)
	}
	if out, code := script("status"); code != 0 || !strings.Contains(out, "running") {
		t.Fatalf("status: exit %d, want 0", code)
	}
	if _, code := script("down"); code != 0 {
		t.Fatalf("down: exit %d, want 0", code)
	}
	for name, pid := range pids {
		if running(pid) {
			t.Errorf("%s (pid %d) still runs after down", name, pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("down left %s behind (stat: %v)", dir, err)
	}
	if _, code := script("status"); code != exitNotRunning {
		t.Errorf("status after down: exit %d, want %d", code, exitNotRunning)
	}
}

// running reports whether pid is a live process. The detached processes are
// not our children, so once they exit they are reaped by init; a zombie
// still waiting for that does not run.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
