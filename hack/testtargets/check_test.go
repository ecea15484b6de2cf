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

package testtargets

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryTestIsRun fails for every _test.go file in the repository, in
// any module and under any build tag, that no make target and no step of
// .ci/run runs.
func TestEveryTestIsRun(t *testing.T) {
	root := filepath.Join("..", "..")
	runs, err := runsOf(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		t.Logf("runner: %s", r)
	}
	// What the check must find, or it reads nothing: a broken parser
	// would otherwise pass by finding no test files either.
	for _, target := range []string{
		"make test",
		"make test-chaos", // fork:line chaos
		"make test-e2e",   // fork:line node
		"make test-ui",    // fork:line ui
		".ci/run",         // fork:line fork
	} {
		if !slices.ContainsFunc(runs, func(r run) bool { return r.Target == target }) {
			t.Errorf("found no go test run by %s", target)
		}
	}
	files, err := unrun(root, runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Errorf("%s: no make target and no step of .ci/run runs this test file; add its package to one (hack/test.sh's lists for unit and integration packages)", f)
	}
}

// TestUnrunTestsAreFound runs the check on small repositories, each with a
// test that nothing runs, and on one where everything is run.
func TestUnrunTestsAreFound(t *testing.T) {
	const makefile = "GO_FLAGS := -tags grpcnotrace\n" +
		".PHONY: test\n" +
		"test: ## unit tests\n" +
		"\thack/test.sh $(TESTFLAGS)\n" +
		"test-chaos:\n" +
		"\tCGO_ENABLED=0 go test $(GO_FLAGS) -tags chaos,grpcnotrace -count=1 \\\n" +
		"\t  ./test/chaos/\n" +
		"test-tools:\n" +
		"\tcd tools/img && GOWORK=off go test ./...\n"
	const script = "#!/usr/bin/env bash\n" +
		"# go test ./commented/... runs nothing\n" +
		"cd \"$ROOT\"\n" +
		"UNIT=(./pkg/... ./cmd/...)\n" +
		"FLAGS=(-trimpath -tags grpcnotrace)\n" +
		"group() {\n" +
		"\tgo test \"${pkgs[@]}\"\n" +
		"}\n" +
		"group \"unit\" -race -- \"${UNIT[@]}\" || rc=1\n" +
		"CGO_ENABLED=0 group \"integration\" \"${FLAGS[@]}\" -- ./test/... || rc=1\n"
	const ci = "(cd bench && go vet ./... && go test -count=1 ./...) || failures+=(bench)\n"
	const untagged = "package x\n"
	const chaos = "//go:build chaos && linux\n\npackage x\n"
	const e2e = "//go:build e2e\n\npackage x\n"
	base := map[string]string{
		"Makefile":                    makefile,
		"hack/test.sh":                script,
		".ci/run":                     ci,
		"go.mod":                      "module example.com/r\n",
		"pkg/a/a_test.go":             untagged,
		"pkg/a/deep/b_test.go":        untagged,
		"cmd/c_test.go":               untagged,
		"test/integration/i_test.go":  untagged,
		"test/chaos/chaos_test.go":    chaos,
		"tools/img/go.mod":            "module example.com/r/tools/img\n",
		"tools/img/img_test.go":       untagged,
		"bench/go.mod":                "module example.com/r/bench\n",
		"bench/b_test.go":             untagged,
		"pkg/a/testdata/x_test.go":    untagged, // not a package
		"_output/tmp/x_test.go":       untagged, // not a package
		"hack/README.md":              "nothing here",
		"test/integration/helper.go":  untagged,
		"test/chaos/helpers_chaos.go": chaos,
	}
	cases := []struct {
		name  string
		extra map[string]string
		drop  []string
		want  []string
	}{
		{name: "everything run"},
		{name: "a package outside every pattern", extra: map[string]string{"internal/poll/poll_test.go": untagged},
			want: []string{"internal/poll/poll_test.go"}},
		{name: "a tag no target sets", extra: map[string]string{"test/e2e/e2e_test.go": e2e},
			want: []string{"test/e2e/e2e_test.go"}},
		{name: "a tagged file beside untagged ones", extra: map[string]string{"pkg/a/slow_test.go": e2e},
			want: []string{"pkg/a/slow_test.go"}},
		{name: "a module that ./... does not enter", extra: map[string]string{"pkg/twin/go.mod": "module example.com/twin\n", "pkg/twin/t_test.go": untagged},
			want: []string{"pkg/twin/t_test.go"}},
		{name: "a step removed from .ci/run", drop: []string{".ci/run"}, want: []string{"bench/b_test.go"}},
		{name: "a target's go test removed from the Makefile", extra: map[string]string{"Makefile": strings.Replace(makefile,
			"CGO_ENABLED=0 go test", "# CGO_ENABLED=0 go test", 1)},
			want: []string{"test/chaos/chaos_test.go"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{}
			for k, v := range base {
				files[k] = v
			}
			for k, v := range tc.extra {
				files[k] = v
			}
			for _, k := range tc.drop {
				delete(files, k)
			}
			for name, content := range files {
				p := filepath.Join(root, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			runs, err := runsOf(root)
			if err != nil {
				t.Fatal(err)
			}
			got, err := unrun(root, runs)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range got {
				names = append(names, f.String())
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("unrun test files: %v, want %v; runners:\n%v", names, tc.want, runs)
			}
		})
	}
}
