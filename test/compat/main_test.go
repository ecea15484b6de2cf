//go:build compat

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

// Package compat_test runs the controller binary, built as make build builds
// it and with its default flags, on the control plane of the oldest
// Kubernetes minor version the README claims (1.36, or
// BOOK_COMPAT_KUBERNETES): kube-apiserver and kube-controller-manager of
// that version, from hack/tools/kubernetes-<minor> (make test-compat). The
// rest of the tests run on the newest, hack/tools/kubernetes.
package compat_test

import (
	"fmt"
	"os"
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

// defaultKubernetes is the oldest supported minor version.
const defaultKubernetes = "1.36"

var (
	env        *framework.Env
	binary     string
	kubernetes string
)

func TestMain(m *testing.M) {
	kubernetes = os.Getenv("BOOK_COMPAT_KUBERNETES")
	if kubernetes == "" {
		kubernetes = defaultKubernetes
	}
	bin, err := framework.BuildController()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	e, err := framework.SetupWith(framework.SetupOptions{InstallCRD: true, Kubernetes: kubernetes})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting a Kubernetes %s control plane: %v\n", kubernetes, err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	env.Teardown()
	os.Exit(code)
}
