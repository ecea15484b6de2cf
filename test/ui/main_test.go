package ui

import (
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var (
	env    *framework.Env
	binary string
)

func TestMain(m *testing.M) {
	framework.MainWithController(m, true, &env, &binary)
}
