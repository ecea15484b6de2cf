// Package parity_test runs book-controller and its controller-runtime twin
// (examples/controller-runtime), with the scaffold's settings and with the
// bench's tuned ones, as built binaries through the same scenarios
// against one local control plane, and compares what they leave behind:
// ConfigMaps, Book status and event reasons. Any difference is either a bug
// in the twin or a documented difference in docs/controller-runtime.md.
package parity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var (
	env *framework.Env
	// ours and twin are the paths of the two built controllers.
	ours, twin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "book-controller-parity-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	root := framework.RepoRoot()
	ours = filepath.Join(dir, "book-controller")
	twin = filepath.Join(dir, "book-controller-runtime")
	// Sequential builds: the machine is shared. The twin is its own module
	// (so controller-runtime never enters this module's graph) and can only
	// be built from its directory.
	for _, b := range []struct{ out, dir, pkg string }{
		{ours, root, "./cmd/controller"},
		{twin, filepath.Join(root, "examples", "controller-runtime"), "./cmd"},
	} {
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		build.Dir = b.dir
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s in %s: %v\n", b.pkg, b.dir, err)
			return 1
		}
	}

	// The control plane starts without the Book CRD so that both binaries
	// can be seen refusing to start; TestParity installs it.
	e, err := framework.Setup(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration setup:", err)
		return 1
	}
	defer e.Teardown()
	env = e
	return m.Run()
}
