// Package versions_test runs the two-version Book CRD, manifests/crd-v2.yaml,
// on a real kube-apiserver and etcd: the validation of both versions with
// every invalid example, v2 as the stored version, each version's printer
// columns, and v1's deprecation warning. The conversion webhook that the CRD
// names does not run here yet, so these tests create and read v2 Books and
// send v1 only what needs no conversion (invalid Books, empty lists); the
// conversion itself is proven in pkg/apis/webapp/v1.
package versions_test

import (
	"fmt"
	"os"
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	e, err := framework.SetupWith(framework.SetupOptions{InstallCRD: true, CRDFile: framework.CRDV2File})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration setup:", err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	e.Teardown()
	os.Exit(code)
}
