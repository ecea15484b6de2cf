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
