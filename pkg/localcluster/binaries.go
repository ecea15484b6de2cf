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

package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Names of the binaries and of the processes this package runs; they are also
// the keys of Cluster.Pids.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	Kubectl               = "kubectl"
)

// buildScript is relative to the repository root.
const buildScript = "hack/build-tools.sh"

// fork:begin node
// nodeBuildScript builds NodeBinaries, relative to the repository root.
const nodeBuildScript = "hack/build-node.sh"

// fork:end node

// controlPlane are the binaries Start runs.
var controlPlane = []string{Etcd, KubeAPIServer, KubeControllerManager}

// EnsureBinaries builds the named binaries (Etcd, KubeAPIServer,
// KubeControllerManager, Kubectl, NodeBinaries; by default the three of the control plane)
// if they are not built yet, by running hack/build-tools.sh under repoRoot,
// and returns the directory that holds them. A cold build takes minutes; a
// warm one a fraction of a second. The script's progress goes to os.Stderr
// so that a slow first run is not silent.
func EnsureBinaries(ctx context.Context, repoRoot string, names ...string) (binDir string, err error) {
	return EnsureBinariesOf(ctx, repoRoot, "", names...)
}

// EnsureBinariesOf is EnsureBinaries for the Kubernetes of another
// supported minor version, e.g. "1.36": its own tools module
// (hack/tools/kubernetes-1.36, hack/build-tools.sh --k8s 1.36) builds Etcd,
// KubeAPIServer and KubeControllerManager into a directory of its own. ""
// is the version the tests run, as EnsureBinaries.
func EnsureBinariesOf(ctx context.Context, repoRoot, kubernetes string, names ...string) (binDir string, err error) {
	if len(names) == 0 {
		names = controlPlane
	}
	var args []string
	if kubernetes != "" {
		args = append(args, "--k8s", kubernetes)
	}
	// fork:begin node
	// The node's binaries come from a script of their own (which has
	// hack/build-tools.sh build kubelet and kube-scheduler), after the
	// control plane's; the node runs only the default version.
	for i, name := range names {
		if name != NodeBinaries {
			continue
		}
		if kubernetes != "" {
			return "", fmt.Errorf("localcluster: the node runs only the default Kubernetes, not %s: leave Options.Kubernetes empty", kubernetes)
		}
		others := append(append([]string{}, names[:i]...), names[i+1:]...)
		if _, err := runBuildScript(ctx, repoRoot, buildScript, others...); err != nil {
			return "", err
		}
		if binDir, err = runBuildScript(ctx, repoRoot, nodeBuildScript); err != nil {
			return "", err
		}
		return binDir, checkBinaries(binDir, names...)
	}
	// fork:end node
	if binDir, err = runBuildScript(ctx, repoRoot, buildScript, append(args, names...)...); err != nil {
		return "", err
	}
	return binDir, checkBinaries(binDir, names...)
}

// runBuildScript runs script (relative to repoRoot) with args and returns
// the last line of its output: the bin directory.
func runBuildScript(ctx context.Context, repoRoot, script string, args ...string) (string, error) {
	path := filepath.Join(repoRoot, script)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("localcluster: %s not found: pass the repository root to EnsureBinaries", path)
	}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 4096}
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Dir = repoRoot
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(os.Stderr, stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("localcluster: %s failed (%v): %s", script, err, lastLine(stderr.String()))
	}
	binDir := lastLine(stdout.String())
	if binDir == "" {
		return "", fmt.Errorf("localcluster: %s printed no bin directory", script)
	}
	return binDir, nil
}

// checkBinaries fails early with the fix, instead of letting the first
// exec fail with a bare "no such file or directory".
func checkBinaries(binDir string, names ...string) error {
	if len(names) == 0 {
		names = controlPlane
	}
	for _, name := range names {
		// fork:begin node
		if name == NodeBinaries {
			if err := checkBinaries(binDir, nodeFiles...); err != nil {
				return err
			}
			continue
		}
		// fork:end node
		p := filepath.Join(binDir, name)
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("localcluster: %s not found in %s: run %s", name, binDir, buildScript)
		}
	}
	return nil
}

// findRepoRoot walks up from the working directory so that tests, which run
// in their package directory, can find hack/build-tools.sh.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, buildScript)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("localcluster: no " + buildScript + " above the working directory: set Options.BinDir")
		}
		dir = parent
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailBuffer keeps only the end of what is written, enough for an error
// message, however long the output.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
