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
	"testing"

	"k8s.io/client-go/rest" // fork:line v2

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
	// Built as make build and make twin-build do, so a binary that is
	// already up to date in _output/bin is reused. The twin is its own
	// module (so controller-runtime never enters this module's graph).
	var err error
	if ours, err = framework.BuildController(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if twin, err = framework.BuildTwin(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// fork:begin v2
	// A v1 request is answered with the deprecation warning: not logged
	// every time.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	// fork:end v2

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
