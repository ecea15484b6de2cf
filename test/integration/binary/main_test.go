// Package binary_test runs the built book-controller binary, the way users
// do, against a real control plane that starts without the Book CRD.
package binary_test

import (
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var (
	env    *framework.Env
	binary string
)

func TestMain(m *testing.M) {
	framework.MainWithController(m, false, &env, &binary)
}
