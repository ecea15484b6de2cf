//go:build linux

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
