// Package controller_test runs the Book controller in-process against a real
// kube-apiserver, etcd and kube-controller-manager, and asserts the state of
// the cluster.
package controller_test

import (
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.Main(m, true, &env)
}
