//go:build linux

// Package sharding_test runs book-controller replicas with --shards
// against a real control plane (with the ShardedListAndWatch feature gate)
// and proves from the API server's side (Leases, the audit log, the
// objects) that the Books are split between them. Its tests run one at a
// time: a sharded replica watches every namespace. The heavier proofs
// (kill -9 and partition of a shard holder, 30 namespaces × 100 Books) are
// in test/chaos.
package sharding_test

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
