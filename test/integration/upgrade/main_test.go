//go:build upgrade

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

// Package upgrade_test upgrades a running installation of the last release
// that serves only webapp.ydzs.io/v1 to this build and the two-version CRD,
// and rolls it back, against a real kube-apiserver, etcd and
// kube-controller-manager: the old controller is that release's binary,
// built from the repository's history.
package upgrade_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"ydzs.io/book-controller/test/integration/framework"
)

var (
	env    *framework.Env
	binary string
)

func TestMain(m *testing.M) {
	// Every v1 request is answered with the deprecation warning, which is
	// checked once (applyV1Examples), not logged thousands of times.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	framework.MainWithController(m, false, &env, &binary)
}
