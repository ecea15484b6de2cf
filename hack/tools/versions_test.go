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

// Package tools_test checks that the tools module building the Kubernetes
// binaries, and the controller-runtime twin, build with the same versions of
// the modules they share with book-controller.
//
// Why it matters: the Go build cache keys a compiled package on the versions
// of everything below it, so a single differing golang.org/x/sys makes a cold
// `make demo` compile client-go, apimachinery and the rest once for
// kube-apiserver and again for the controller and the tests. Aligned, the
// second build finds them all in the cache.
package tools_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listFormat prints, for every package of a build, the module it comes from
// and the version actually used (the replacement's, if replaced).
const listFormat = `{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} {{.Version}}{{end}}{{end}}`

// moduleVersions returns the version of every module that provides a package
// to the build of pkgs in dir (test dependencies included when test is set).
func moduleVersions(t *testing.T, dir string, test bool, pkgs ...string) map[string]string {
	t.Helper()
	args := []string{"list", "-deps", "-f", listFormat}
	if test {
		args = append(args, "-test")
	}
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	versions := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 { // the main module has no version
			continue
		}
		versions[f[0]] = f[len(f)-1]
	}
	return versions
}

func TestSharedModulesHaveOneVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("lists three module graphs")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	product := moduleVersions(t, root, true, "./...")
	for _, other := range []struct {
		dir  string
		test bool
		pkgs []string
	}{
		{"hack/tools/kubernetes", false, []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-scheduler"}},
		{"examples/controller-runtime", true, []string{"./..."}}, // fork:line twin
	} {
		theirs := moduleVersions(t, filepath.Join(root, other.dir), other.test, other.pkgs...)
		var raiseTheirs, raiseOurs []string
		for _, mod := range slices.Sorted(maps.Keys(theirs)) {
			v := theirs[mod]
			ours, ok := product[mod]
			if !ok || ours == v {
				continue
			}
			t.Errorf("%s builds %s %s, book-controller %s", other.dir, mod, v, ours)
			if semverLess(v, ours) {
				raiseTheirs = append(raiseTheirs, mod+"@"+ours)
			} else {
				raiseOurs = append(raiseOurs, mod+"@"+v)
			}
		}
		if len(raiseTheirs) > 0 {
			t.Errorf("fix: (cd %s && go get %s && go mod tidy)", other.dir, strings.Join(raiseTheirs, " "))
		}
		if len(raiseOurs) > 0 {
			t.Errorf("fix: go get %s && go mod tidy (in the repository root)", strings.Join(raiseOurs, " "))
		}
	}
}

// semverLess compares two module versions well enough to say which side to
// raise: numerically by major, minor, patch, then as strings (pre-releases
// and pseudo-versions).
func semverLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := range 3 {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return a < b
}

func versionParts(v string) [3]int {
	var p [3]int
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	core, _, _ = strings.Cut(core, "+")
	for i, s := range strings.SplitN(core, ".", 3) {
		_, _ = fmt.Sscanf(s, "%d", &p[i])
	}
	return p
}
