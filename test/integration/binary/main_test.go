// Package binary_test runs the built book-controller binary, the way users
// do, against a real control plane that starts without the Book CRD.
package binary_test

import (
	"fmt"
	"os"
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var (
	env    *framework.Env
	binary string
)

func TestMain(m *testing.M) {
	var err error
	if binary, err = framework.BuildController(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		e, err := framework.Setup(false)
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration setup:", err)
			return 1
		}
		defer e.Teardown()
		env = e
		return m.Run()
	}()
	os.Exit(code)
}
