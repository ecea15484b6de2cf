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
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryGoFileHasTheHeader is the check make test runs: every Go file of
// the repository, hand-written or generated, in every module, starts with
// the license header (after its build constraints).
func TestEveryGoFileHasTheHeader(t *testing.T) {
	root := filepath.Join("..", "..")
	hdr, err := os.ReadFile(filepath.Join(root, headerFile))
	if err != nil {
		t.Fatal(err)
	}
	missing, err := Missing(root, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d Go files lack the license header of %s; run hack/update-boilerplate.sh:\n  %s",
			len(missing), headerFile, strings.Join(missing, "\n  "))
	}
}

const testHeader = "/*\nCopyright The Test Authors.\n*/\n"

func TestWithHeader(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"package doc", "// Package x does y.\npackage x\n",
			testHeader + "\n// Package x does y.\npackage x\n"},
		{"build constraint", "//go:build linux\n\npackage x\n",
			"//go:build linux\n\n" + testHeader + "\npackage x\n"},
		{"old and new constraints", "//go:build !ignore\n// +build !ignore\n\n// Package x.\npackage x\n",
			"//go:build !ignore\n// +build !ignore\n\n" + testHeader + "\n// Package x.\npackage x\n"},
		{"leading blank lines", "\n\npackage x\n",
			testHeader + "\npackage x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// hack/boilerplate.go.txt ends in a blank line, which the
			// result does not double.
			got := string(WithHeader([]byte(tc.src), []byte(testHeader+"\n")))
			if got != tc.want {
				t.Fatalf("WithHeader(%q) =\n%q\nwant\n%q", tc.src, got, tc.want)
			}
			if !HasHeader([]byte(got), []byte(testHeader)) {
				t.Errorf("HasHeader(WithHeader(%q)) = false", tc.src)
			}
			if HasHeader([]byte(tc.src), []byte(testHeader)) {
				t.Errorf("HasHeader(%q) = true before the header was added", tc.src)
			}
			// Still Go, with its package doc and its build constraint.
			f, err := parser.ParseFile(token.NewFileSet(), "x.go", got, parser.ParseComments)
			if err != nil {
				t.Fatalf("the result does not parse: %v\n%s", err, got)
			}
			if strings.Contains(tc.src, "// Package") && (f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), "Package x")) {
				t.Errorf("the package doc is no longer the package clause's comment:\n%s", got)
			}
			if line, _, _ := strings.Cut(got, "\n"); strings.HasPrefix(tc.src, "//go:build") && !constraint.IsGoBuild(line) {
				t.Errorf("the first line is %q, want the //go:build line", line)
			}
		})
	}
}

func TestMissingSkipsOutputAndDotDirectories(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package a\n")
	write("sub/b.go", testHeader+"\npackage b\n")
	write("sub/c.go", "//go:build linux\n\n"+testHeader+"\npackage b\n")
	write("_output/d.go", "package d\n")
	write(".git/e.go", "package e\n")
	write("sub/testdata/f.go", "package f\n")
	write("notes.txt", "not Go\n")
	missing, err := Missing(root, []byte(testHeader))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(missing, ",") != "a.go" {
		t.Errorf("Missing = %q, want only a.go", missing)
	}
}
