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

package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

var (
	loadOnce sync.Once
	theRepo  *Repo
	theDocs  *Docs
	loadErr  error
)

// repo loads the repository once for every test of the package.
func repo(t *testing.T) (*Repo, *Docs) {
	t.Helper()
	loadOnce.Do(func() { theRepo, theDocs, loadErr = load(root) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return theRepo, theDocs
}

func load(dir string) (*Repo, *Docs, error) {
	r, err := LoadRepo(dir)
	if err != nil {
		return nil, nil, err
	}
	d, err := LoadDocs(r)
	return r, d, err
}

// check is one of the package's checks, run on a loaded tree.
type check func(*Repo, *Docs) []Finding

var checks = map[string]check{
	"links":       CheckLinks,
	"paths":       CheckPaths,
	"targets":     CheckMakeTargets,
	"help":        func(r *Repo, _ *Docs) []Finding { return CheckMakeHelp(r) },
	"flags":       CheckFlags,
	"metrics":     CheckMetrics,
	"reasons":     CheckReasons,
	"alerts":      CheckAlerts,
	"identifiers": CheckIdentifiers,
	"length":      CheckLength,
	"comments": func(r *Repo, _ *Docs) []Finding {
		f, err := CheckComments(r)
		if err != nil {
			return []Finding{{Pos: "-", Msg: err.Error()}}
		}
		return f
	},
}

func runCheck(t *testing.T, name string) {
	r, d := repo(t)
	for _, f := range checks[name](r, d) {
		t.Error(f)
	}
}

// The checks on the repository itself, one test each.

func TestLinksAndAnchorsResolve(t *testing.T)                 { runCheck(t, "links") }
func TestPathsNamedInDocsExist(t *testing.T)                  { runCheck(t, "paths") }
func TestMakeTargetsNamedInDocsExist(t *testing.T)            { runCheck(t, "targets") }
func TestMakeHelpListsEveryTarget(t *testing.T)               { runCheck(t, "help") }
func TestFlagsNamedInDocsExistWithTheirDefault(t *testing.T)  { runCheck(t, "flags") }
func TestMetricsExistAndAreDocumented(t *testing.T)           { runCheck(t, "metrics") }
func TestReasonsExistAndAreDocumented(t *testing.T)           { runCheck(t, "reasons") }
func TestAlertsExistAndAreDocumented(t *testing.T)            { runCheck(t, "alerts") }
func TestGoNamesInDocsExist(t *testing.T)                     { runCheck(t, "identifiers") }
func TestCommentsCiteFilesAndFunctionsThatExist(t *testing.T) { runCheck(t, "comments") }
func TestCappedPagesAreWithinTheirCap(t *testing.T)           { runCheck(t, "length") }

// TestGoodTreePasses runs every check on testdata/good, the tree the broken
// cases start from: each broken case fails because of its one change.
func TestGoodTreePasses(t *testing.T) {
	r, d, err := load("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range checks {
		for _, f := range c(r, d) {
			t.Errorf("%s: %s", name, f)
		}
	}
}

// TestBrokenInputFails copies testdata/good, lays testdata/broken/<case>
// over it and runs the one check that case breaks: it must report the
// broken statement at its file and line, saying what to fix.
func TestBrokenInputFails(t *testing.T) {
	cases := []struct {
		name, check string
		// want are substrings of one finding: its position and its message.
		want []string
	}{
		{"link-file", "links", []string{"docs/extra.md:5:", "docs/missing.md, which does not exist"}},
		{"link-anchor", "links", []string{"docs/extra.md:3:", "#no-such-heading", "no heading of docs/flags.md"}},
		{"path", "paths", []string{"docs/extra.md:3:", "pkg/controller/gone.go, which does not exist"}},
		{"html-path", "paths", []string{"pkg/ui/static/index.html:2:", "pkg/controller/configmapcache.go, which does not exist"}},
		{"bare-file", "paths", []string{"docs/extra.md:3:", "the file gone.go, which is nowhere"}},
		{"make-target", "targets", []string{"docs/extra.md:4:", `make target "deploy"`}},
		{"make-table", "targets", []string{"Makefile:12:", `"test-e2e" is missing from the table`}},
		{"make-help", "help", []string{"Makefile:12:", `make help does not list target "test-e2e"`}},
		{"flag-unknown", "flags", []string{"docs/extra.md:3:", "--worker, which is no flag"}},
		{"flag-default", "flags", []string{"docs/extra.md:3:", "--workers the default 64, but its default is 128 (docs/flags.md:8)"}},
		{"flag-command", "flags", []string{"docs/extra.md:4:", "--workerz"}},
		{"flag-bench", "flags", []string{"docs/extra.md:3:", "-rounds", "test/bench/main.go"}},
		{"metric-unknown", "metrics", []string{"docs/extra.md:3:", "book_controller_gone_total"}},
		{"metric-undocumented", "metrics", []string{"pkg/metrics/more.go:6:", "book_controller_new_gauge is not documented in docs/operations.md"}},
		{"reason-unknown", "reasons", []string{"docs/extra.md:3:", "reason ConfigMapGone"}},
		{"reason-undocumented", "reasons", []string{"pkg/controller/more.go:4:", "ConfigMapNew is not documented in docs/operations.md"}},
		{"alert-unknown", "alerts", []string{"docs/extra.md:3:", "alert BookControllerGone"}},
		{"alert-undocumented", "alerts", []string{"prometheus_rule.yaml:6:", "BookControllerNew has no section in docs/operations.md"}},
		{"test-name", "identifiers", []string{"docs/extra.md:3:", "the test TestGoneAway"}},
		{"name", "identifiers", []string{"docs/extra.md:3:", "shardGate"}},
		{"comment-path", "comments", []string{"pkg/controller/more.go:3:", "pkg/controller/informers.go, which does not exist"}},
		{"comment-yaml", "comments", []string{"manifests/rbac.yaml:1:", "reconcileConfigMap"}},
		{"comment-name", "comments", []string{"pkg/controller/more.go:3:", "cacheBehind"}},
		{"length", "length", []string{"README.md:151:", "151 lines shown, over its cap of 150"}},
		{"comment-qualified", "comments", []string{"pkg/controller/more.go:3:", "metrics.Gone, which package metrics does not declare"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTree(t, "testdata/good", dir)
			copyTree(t, filepath.Join("testdata/broken", c.name), dir)
			r, d, err := load(dir)
			if err != nil {
				t.Fatal(err)
			}
			findings := checks[c.check](r, d)
			for _, f := range findings {
				if containsAll(f.String(), c.want) {
					return
				}
			}
			t.Errorf("the %s check found no %q in %v", c.check, c.want, findings)
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// copyTree copies the files under from into to, replacing any there.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
