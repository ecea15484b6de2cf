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

package main

import (
	"path"
	"slices"
	"sort"
	"strings"
)

// part is something a fork may leave out: the paths it drops whole (a
// file, or a directory and all below it), and the blocks between
// `fork:begin <name>` and `fork:end <name>` in the files it keeps.
type part struct {
	// always: every fork leaves it out; else only --minimal does.
	always bool
	paths  []string
	why    string
	// moves maps a path prefix to another: where a file the part leaves
	// in place goes, in paths and in the text that names them.
	moves map[string]string
}

// parts is the table of optional parts. Paths are as in this project,
// before renaming.
var parts = map[string]part{
	"v2": {always: true, why: "the older API version v1, the conversion between v1 and v2, its webhook and the storage migration: a fork serves the controller's version, v2, alone, under the name --version gives it (docs/api-versions.md tells how to add a version)",
		paths: []string{
			"pkg/apis/webapp/v1", "pkg/apis/webapp/fuzzer", "pkg/apis/webapp/v2/conversion.go",
			"pkg/generated/clientset/versioned/typed/webapp/v1", "pkg/generated/informers/externalversions/webapp/v1",
			"pkg/generated/listers/webapp/v1", "pkg/generated/applyconfiguration/webapp/v1",
			"manifests/examples/book-free.yaml", "manifests/examples/book-long-title.yaml", "manifests/examples/book-max-price.yaml",
			"manifests/examples/book-sample.yaml", "manifests/examples/book-unicode-title.yaml", "manifests/examples/invalid",
			"manifests/versions_test.go",
			"test/integration/versions", "hack/crdgen", "docs/api-versions.md",
			"pkg/migration", "pkg/manager/migration.go", "test/integration/migration", "test/e2e/conversion_test.go",
			"manifests/rbac/storage_migration_role.yaml",
			"pkg/webhook", "pkg/manager/webhook.go", "pkg/manager/webhookonly.go", "pkg/manager/webhookswitch.go", "test/integration/deploy/webhook_test.go",
			"test/integration/upgrade", "manifests/components/webhook-only", "test/integration/framework/webhook.go",
			"test/integration/framework/conversion.go",
			"pkg/ui/conversions.go", "pkg/ui/conversions_test.go", "pkg/manager/webhook_test.go",
			"manifests/rbac/webhook_role.yaml", "manifests/rbac/webhook_role_binding.yaml",
			"manifests/rbac/webhook_cluster_role.yaml", "manifests/rbac/webhook_cluster_role_binding.yaml",
			"manifests/manager/webhook_service.yaml", "manifests/manager/webhook_network_policy.yaml",
			"test/bench/conversion.go", "test/bench/conversion_report.go", "test/bench/conversion_test.go",
			"docs/bench/conversion.md", "docs/bench/conversion.json",
			"docs/bench/conversion-no-watch-cache.md", "docs/bench/conversion-no-watch-cache.json",
			"test/bench/migration.go", "test/bench/v1phase.go", "test/bench/v1phase_test.go", "test/bench/migration_report.go", "test/bench/migration_test.go",
			"docs/bench/migration.md", "docs/bench/migration.json",
		},
		// v2's examples become the examples.
		moves: map[string]string{"manifests/examples/v2/": "manifests/examples/"}},
	"fork": {always: true, why: "this command, its test and its page",
		paths: []string{"hack/fork", "hack/test-fork.sh", "hack/test-failures.awk", "docs/fork.md", ".ci"}},
	"twin": {why: "the controller-runtime twin and the parity test",
		paths: []string{"examples/controller-runtime", "test/integration/parity", "test/integration/framework/twin.go", "docs/controller-runtime.md"}},
	"bench": {why: "the benchmark and its results",
		paths: []string{"test/bench", "docs/bench", "docs/benchmark.md"}},
	"ui": {why: "the live view",
		paths: []string{"pkg/ui", "test/ui", "hack/test-ui.sh", "docs/ui.md", "docs/ui.png", "pkg/manager/ui.go", "test/integration/controller/ui_test.go"}},
	"shards": {why: "--shards: several replicas each serving part of the objects",
		paths: []string{"pkg/shard", "test/integration/sharding", "test/integration/framework/shards.go", "manifests/overlays/sharded", "docs/sharding.md", "pkg/manager/shards.go", "pkg/preflight/shards.go", "test/compat/shards_test.go"}},
	"watchdecode": {why: "the Book watch stream's own decoder",
		paths: []string{"pkg/watchdecode", "test/integration/controller/watchdecode_test.go"}},
	"node": {why: "the local node that runs pods (make cluster-up NODE=1) and the end-to-end tests on it",
		paths: []string{"test/e2e", "docs/node.md", "hack/build-node.sh", "hack/install-runc.sh",
			"hack/tools/node", "hack/tools/containerd",
			"pkg/localcluster/node.go", "pkg/localcluster/node_config.go", "pkg/localcluster/node_host.go",
			"pkg/localcluster/node_host_other.go", "pkg/localcluster/node_netns.go", "pkg/localcluster/node_pki.go",
			"pkg/localcluster/node_egress.go",
			"pkg/localcluster/scheduler.go"}},
	"chaos": {why: "the fault-injection suite",
		paths: []string{"test/chaos"}},
}

// executables committed to this project by mistake; no fork copies them.
var dropAlways = []string{"hack/docs/docs.test", "hack/tools/image/image"}

func partNames() string {
	var n []string
	for name := range parts {
		n = append(n, name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

func optionalParts() string {
	var n []string
	for name, p := range parts {
		if !p.always {
			n = append(n, name)
		}
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// dropper says which parts a fork leaves out: with minimal, every one but
// those of keep.
func dropper(minimal bool, keep []string) func(string) bool {
	return func(name string) bool { return parts[name].always || (minimal && !slices.Contains(keep, name)) }
}

// moves are the path moves of the parts left out, longest prefix first.
func moves(drop func(string) bool) [][2]string {
	var m [][2]string
	for name, pt := range parts {
		if drop(name) {
			for from, to := range pt.moves {
				m = append(m, [2]string{from, to})
			}
		}
	}
	sort.Slice(m, func(i, j int) bool { return len(m[i][0]) > len(m[j][0]) })
	return m
}

// dropped reports whether the file p (slash-separated, relative to the
// root) is left out.
func dropped(p string, drop func(string) bool) bool {
	if slices.Contains(dropAlways, p) {
		return true
	}
	for name, pt := range parts {
		if !drop(name) {
			continue
		}
		for _, q := range pt.paths {
			if p == q || strings.HasPrefix(p, q+"/") || (path.Ext(q) == "" && strings.HasPrefix(p, q+"/")) {
				return true
			}
		}
	}
	return false
}
