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

// Package deploy_test checks what `kubectl apply -k manifests/` and the
// Dockerfile deliver, against a real kube-apiserver: that every rendered
// object is accepted (server-side dry run), that the Deployment is hardened
// as documented, that the RBAC rules are exactly the ones the code needs
// (the controller converges under the ServiceAccount's credentials, and
// nothing more is allowed), and that the Dockerfile's build step makes a
// static binary from the build context .dockerignore lets through.
package deploy_test

import (
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.Main(m, true, &env)
}
