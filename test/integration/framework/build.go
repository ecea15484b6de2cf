//go:build linux

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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Our binaries are built with one set of flags everywhere: `make build`,
// `make twin-build`, `make demo` and these helpers all run
// `CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false` (the Makefile's
// GO_BUILD) into _output/bin. So the Go build cache
// holds one compiled copy of each package (shared with kube-apiserver's
// build, see hack/tools/README.md), and a binary that is already up to date
// in _output/bin, say after `make demo`, is not even linked again: go build
// compares its build ID and leaves it alone.

// BuildController builds cmd/controller into _output/bin/book-controller as
// `make build` does, its version and commit from hack/version.sh, unless it
// is up to date, and returns its path.
func BuildController() (string, error) {
	ldflags, err := VersionLDFlags()
	if err != nil {
		return "", err
	}
	return buildBinary("book-controller", RepoRoot(), "./cmd/controller", "-ldflags", ldflags)
}

// VersionLDFlags are the -ldflags that stamp the version and commit into
// the controller: `hack/version.sh --ldflags`, as the Makefile passes them.
func VersionLDFlags() (string, error) {
	return VersionScript("--ldflags")
}

// VersionScript runs hack/version.sh with args and returns its one line.
func VersionScript(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "version.sh"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/version.sh %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// fork:begin twin
// BuildTwin builds the controller-runtime twin (examples/controller-runtime,
// a module of its own) into _output/bin/book-controller-runtime as
// `make twin-build` does, unless it is up to date, and returns its path.
func BuildTwin() (string, error) {
	return buildBinary("book-controller-runtime", filepath.Join(RepoRoot(), "examples", "controller-runtime"), "./cmd")
}

// fork:end twin

// fork:begin v2
// BuildRevision builds cmd/controller as it was at the commit rev (a
// release CHANGELOG.md names) into _output/revisions/<rev>/book-controller,
// from `git archive` of that commit, unless it is there already, and
// returns its path: the old controller of an upgrade or a rollback.
func BuildRevision(rev string) (string, error) {
	dir := filepath.Join(RepoRoot(), "_output", "revisions", rev)
	bin := filepath.Join(dir, "book-controller")
	if isFile(bin) {
		return bin, nil
	}
	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", RepoRoot(), rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("extracting commit %s (git archive; a shallow clone lacks it: fetch the history): %v\n%s", rev, err, out)
	}
	args := []string{"build", "-trimpath", "-tags", "grpcnotrace", "-gcflags=all=-dwarf=false", "-o", bin, "./cmd/controller"}
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building commit %s (CGO_ENABLED=0 go %s in %s): %v\n%s", rev, strings.Join(args, " "), src, err, out)
	}
	return bin, nil
}

// fork:end v2

func buildBinary(name, moduleDir, pkg string, flags ...string) (string, error) {
	binDir := filepath.Join(RepoRoot(), "_output", "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	// Test packages run in parallel processes; the second to ask waits for
	// the first's build and then finds the binary up to date.
	lock, err := os.OpenFile(filepath.Join(binDir, "."+name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	bin := filepath.Join(binDir, name)
	args := append(append([]string{"build", "-trimpath", "-tags", "grpcnotrace", "-gcflags=all=-dwarf=false"}, flags...), "-o", bin, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s (CGO_ENABLED=0 go %s in %s): %v\n%s", name, strings.Join(args, " "), moduleDir, err, out)
	}
	return bin, nil
}
