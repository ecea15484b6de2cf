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

// Package versions_test runs the two-version Book CRD, manifests/crd.yaml,
// on a real kube-apiserver and etcd: the validation of both versions with
// every invalid example, v2 as the stored version, each version's printer
// columns, v1's deprecation warning, and conversion through the webhook
// (pkg/webhook, run in this process on 127.0.0.1 with its certificates in a
// Secret and its CA injected into the CRD), through CA rotations.
package versions_test

import (
	"fmt"
	"os"
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	e, err := framework.SetupWith(framework.SetupOptions{InstallCRD: true, OwnConversion: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration setup:", err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	e.Teardown()
	os.Exit(code)
}
