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
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Repo is what the checks know of a checkout, all of it derived from the
// tree itself: its files, its Makefile's targets, the flags of the
// controller (from docs/flags.md, which cmd/controller's test holds to the
// flag set), of the twin and of the bench, the metrics, Ready reasons,
// event reasons and alerts the code and manifests define, and every
// identifier its Go code uses.
type Repo struct {
	Root string
	// files and dirs are every path in the tree, relative, with slashes;
	// bases the base names of the files.
	files, dirs, bases map[string]bool
	// top holds the names at the root (pkg, docs, Makefile…): a path in a
	// doc or comment that starts with one of them is a path of this
	// repository.
	top map[string]bool
	// modules are the directories holding a go.mod, "" for the root.
	modules []string

	// Targets maps each Makefile rule to its line.
	Targets map[string]int
	Flags   *FlagSet
	// TwinFlags and BenchFlags are the flags of the controller-runtime
	// twin and of the bench, by name.
	TwinFlags, BenchFlags map[string]bool
	// TwinZapFlags tells whether the twin binds controller-runtime's zap
	// flags (--zap-*).
	TwinZapFlags bool

	// Metrics maps each metric the code defines to where.
	Metrics map[string]string
	// Reasons are the Ready condition's reasons (pkg/controller's Reason*
	// constants); EventReasons the reasons of its Events (Event*).
	Reasons, EventReasons map[string]string
	// Alerts are the alert names of the PrometheusRule.
	Alerts map[string]string

	// idents holds every identifier of the repository's Go code, and the
	// camel-case words of its string literals and struct tags; pkgDecls
	// the top-level names of each package name.
	idents map[string]bool
	// modIdents holds the same per Go module ("" the root's), for
	// comments, which cite names of their own module or of the root's.
	modIdents map[string]map[string]bool
	// goComments are the comment lines of the hand-written Go code.
	goComments []commentLine
	pkgDecls   map[string]map[string]bool
}

// skipDir tells which directories hold nothing of the repository's own:
// build output and git's; and test fixtures, which exist (a doc may name
// them) but whose code, docs and comments are not the repository's.
func skipDir(name string) bool {
	return name == ".git" || name == "_output" || name == "testdata" || name == "node_modules"
}

// fixture tells whether rel is inside a testdata directory.
func fixture(rel string) bool {
	return strings.HasPrefix(rel, "testdata/") || strings.Contains(rel, "/testdata/")
}

// LoadRepo derives the facts of the checkout at root.
func LoadRepo(root string) (*Repo, error) {
	r := &Repo{Root: root, files: map[string]bool{}, dirs: map[string]bool{}, bases: map[string]bool{}, top: map[string]bool{}}
	if err := r.walk(); err != nil {
		return nil, err
	}
	steps := []func() error{r.loadTargets, r.loadFlags, r.loadGo, r.loadAlerts}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func joinRoot(root, rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// walk lists the tree.
func (r *Repo) walk() error {
	entries, err := os.ReadDir(r.Root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !skipDir(e.Name()) {
			r.top[e.Name()] = true
		}
	}
	return filepath.WalkDir(r.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.Root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(d.Name()) && d.Name() != "testdata" {
				return filepath.SkipDir
			}
			r.dirs[rel] = true
			return nil
		}
		r.files[rel] = true
		r.bases[d.Name()] = true
		if d.Name() == "go.mod" {
			r.modules = append(r.modules, strings.TrimSuffix(path.Dir(rel), "."))
		}
		return nil
	})
}

// exists tells whether rel (relative to the root, slashes) is a file or a
// directory of the tree.
func (r *Repo) exists(rel string) bool {
	rel = path.Clean(strings.TrimSuffix(rel, "/"))
	return r.files[rel] || r.dirs[rel]
}

// moduleOf returns the directory of the Go module rel is in.
func (r *Repo) moduleOf(rel string) string {
	best := ""
	for _, m := range r.modules {
		if m != "" && (rel == m || strings.HasPrefix(rel, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// markdownFiles lists the Markdown files of the tree.
func (r *Repo) markdownFiles() []string {
	var out []string
	for f := range r.files {
		if strings.HasSuffix(f, ".md") && !fixture(f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

var makeRule = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:([^=]|$)`)

// loadTargets reads the Makefile's rules.
func (r *Repo) loadTargets() error {
	r.Targets = map[string]int{}
	f, err := os.Open(joinRoot(r.Root, "Makefile"))
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		if m := makeRule.FindStringSubmatch(s.Text()); m != nil && !strings.HasPrefix(m[1], ".") {
			r.Targets[m[1]] = n
		}
	}
	return s.Err()
}

// loadFlags reads the controller's flags from docs/flags.md and the twin's
// and the bench's from their source.
func (r *Repo) loadFlags() error {
	fl, err := readFlagsDoc(r.Root)
	if err != nil {
		return err
	}
	r.Flags = fl
	r.TwinFlags, r.TwinZapFlags, err = goFlagNames(r.Root, "examples/controller-runtime/cmd")
	if err != nil {
		return err
	}
	r.BenchFlags, _, err = goFlagNames(r.Root, "test/bench")
	return err
}

// flagDefiners are the methods of the standard flag package (and of a
// flag.FlagSet) that define a flag.
var flagDefiners = map[string]bool{
	"Bool": true, "BoolVar": true, "BoolFunc": true, "String": true, "StringVar": true, "Int": true, "IntVar": true,
	"Int64": true, "Int64Var": true, "Uint": true, "UintVar": true, "Uint64": true, "Uint64Var": true,
	"Float64": true, "Float64Var": true, "Duration": true, "DurationVar": true, "Var": true, "Func": true, "TextVar": true,
}

// goFlagNames finds the flags a main package defines with the standard
// flag package, on flag.CommandLine or a FlagSet of its own
// (x.BoolVar(&v, "name", …), x.Bool("name", …)), and whether it binds
// controller-runtime's zap flags. A missing directory has none.
func goFlagNames(root, dir string) (map[string]bool, bool, error) {
	names, zap := map[string]bool{"h": true, "help": true}, false
	files, err := filepath.Glob(filepath.Join(joinRoot(root, dir), "*.go"))
	if err != nil {
		return nil, false, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, false, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if sel.Sel.Name == "BindFlags" {
				zap = true
			}
			if !flagDefiners[sel.Sel.Name] {
				return true
			}
			for _, a := range call.Args[:min(2, len(call.Args))] {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					names[s] = true
					break
				}
			}
			return true
		})
	}
	return names, zap, nil
}

// loadAlerts reads the alert names of the PrometheusRule.
func (r *Repo) loadAlerts() error {
	r.Alerts = map[string]string{}
	const rules = "manifests/components/prometheus/prometheus_rule.yaml"
	b, err := os.ReadFile(joinRoot(r.Root, rules))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok {
			r.Alerts[strings.TrimSpace(name)] = fmt.Sprintf("%s:%d", rules, i+1)
		}
	}
	return nil
}
