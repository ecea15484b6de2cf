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
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// generated tells whether rel is generated Go code, whose comments are the
// generators'.
func generated(rel string) bool {
	return strings.HasPrefix(rel, "pkg/generated/") || strings.HasPrefix(baseName(rel), "zz_generated.")
}

func baseName(rel string) string { return rel[strings.LastIndexByte(rel, '/')+1:] }

// camelWord matches a camel-case word that starts lower-case: a lower-case letter, then at
// least one upper-case letter later on. Such a word in a comment names an
// identifier, a field or a key.
var camelWord = regexp.MustCompile(`\b[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*\b`)

// loadGo parses every Go file of the tree once: identifiers and top-level
// names for the comment and doc checks, and, from the product's own
// packages (pkg/, cmd/, not tests), its metrics and its Ready and event
// reasons.
func (r *Repo) loadGo() error {
	r.idents, r.pkgDecls, r.modIdents = map[string]bool{}, map[string]map[string]bool{}, map[string]map[string]bool{}
	r.Metrics, r.Reasons, r.EventReasons = map[string]string{}, map[string]string{}, map[string]string{}
	files := make([]string, 0, len(r.files))
	for f := range r.files {
		if strings.HasSuffix(f, ".go") && !fixture(f) {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	fset := token.NewFileSet()
	for _, rel := range files {
		file, err := parser.ParseFile(fset, joinRoot(r.Root, rel), nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if !generated(rel) {
			r.addGoComments(fset, rel, file)
		}
		// hack/docs's own strings name broken things on purpose.
		r.indexIdents(file, r.moduleOf(rel), !strings.HasPrefix(rel, "hack/docs/"))
		r.indexDecls(file)
		product := (strings.HasPrefix(rel, "pkg/") || strings.HasPrefix(rel, "cmd/")) &&
			!strings.HasSuffix(rel, "_test.go") && !generated(rel)
		if product {
			r.indexMetrics(fset, rel, file)
		}
		if product && strings.HasPrefix(rel, "pkg/controller/") {
			r.indexReasons(fset, rel, file)
		}
	}
	r.indexAPIFields()
	return r.indexYAMLKeys()
}

// yamlKey matches a YAML mapping key.
var yamlKey = regexp.MustCompile(`^\s*(?:- )?([A-Za-z][A-Za-z0-9]*):`)

// indexYAMLKeys adds the keys of the tree's YAML files (manifests, CRDs,
// fixtures) to the names a comment may cite: serverName, maxLength…
func (r *Repo) indexYAMLKeys() error {
	for _, rel := range sortedKeys(r.files) {
		if !strings.HasSuffix(rel, ".yaml") && !strings.HasSuffix(rel, ".yml") {
			continue
		}
		b, err := os.ReadFile(joinRoot(r.Root, rel))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if m := yamlKey.FindStringSubmatch(line); m != nil {
				r.addIdent("", m[1])
			}
		}
	}
	return nil
}

func (r *Repo) indexIdents(file *ast.File, mod string, strings bool) {
	ast.Inspect(file, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Ident:
			r.addIdent(mod, x.Name)
		case *ast.BasicLit:
			if strings && x.Kind == token.STRING {
				for _, w := range camelWord.FindAllString(x.Value, -1) {
					r.addIdent(mod, w)
				}
			}
		}
		return true
	})
}

func (r *Repo) addIdent(mod, name string) {
	r.idents[name] = true
	m := r.modIdents[mod]
	if m == nil {
		m = map[string]bool{}
		r.modIdents[mod] = m
	}
	m[name] = true
}

// knownIn tells whether a comment of module mod may cite name: a name of
// its module or of the root module, or the plural of one (prefixWriters).
func (r *Repo) knownIn(mod, name string) bool {
	for _, n := range []string{name, strings.TrimSuffix(name, "s")} {
		if r.modIdents[mod][n] || r.modIdents[""][n] {
			return true
		}
	}
	return false
}

func (r *Repo) indexDecls(file *ast.File) {
	m := r.pkgDecls[file.Name.Name]
	if m == nil {
		m = map[string]bool{}
		r.pkgDecls[file.Name.Name] = m
	}
	for _, d := range file.Decls {
		switch x := d.(type) {
		case *ast.FuncDecl:
			if x.Recv == nil {
				m[x.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, sp := range x.Specs {
				switch y := sp.(type) {
				case *ast.TypeSpec:
					m[y.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range y.Names {
						m[n.Name] = true
					}
				}
			}
		}
	}
}

// indexMetrics finds the metric names of prometheus.*Opts literals
// (Namespace_Subsystem_Name) and of prometheus.NewDesc calls.
func (r *Repo) indexMetrics(fset *token.FileSet, rel string, file *ast.File) {
	ast.Inspect(file, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CompositeLit:
			if sel, ok := x.Type.(*ast.SelectorExpr); ok && isPkg(sel.X, "prometheus") && strings.HasSuffix(sel.Sel.Name, "Opts") {
				parts := map[string]string{}
				for _, e := range x.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); ok {
						parts[k.Name] = stringLit(kv.Value)
					}
				}
				if parts["Name"] != "" {
					name := joinNonEmpty(parts["Namespace"], parts["Subsystem"], parts["Name"])
					r.Metrics[name] = fmt.Sprintf("%s:%d", rel, fset.Position(x.Pos()).Line)
				}
			}
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && isPkg(sel.X, "prometheus") && sel.Sel.Name == "NewDesc" && len(x.Args) > 0 {
				if name := stringLit(x.Args[0]); name != "" {
					r.Metrics[name] = fmt.Sprintf("%s:%d", rel, fset.Position(x.Pos()).Line)
				}
			}
		}
		return true
	})
}

// indexReasons finds the string constants Reason* (the Ready condition's
// reasons) and the untyped string constants Event* (event reasons).
func (r *Repo) indexReasons(fset *token.FileSet, rel string, file *ast.File) {
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				v := stringLit(vs.Values[i])
				at := fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line)
				switch {
				case v == "":
				case strings.HasPrefix(n.Name, "Reason"):
					r.Reasons[v] = at
				case strings.HasPrefix(n.Name, "Event") && vs.Type == nil:
					r.EventReasons[v] = at
				}
			}
		}
	}
}

func isPkg(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, _ := strconv.Unquote(lit.Value)
	return s
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "_")
}
