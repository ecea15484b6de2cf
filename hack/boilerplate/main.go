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

// Command boilerplate puts the license header of hack/boilerplate.go.txt at
// the top of every Go file of the repository that lacks it, below the build
// constraints if the file has some (where deepcopy-gen puts it too), so that
// hand-written files carry the header the generated ones get from
// hack/update-codegen.sh. hack/update-boilerplate.sh runs it; its test,
// which make test runs, fails, naming the files, while one lacks it.
//
//	go run ./hack/boilerplate [-root DIR] [-check]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// headerFile is the header, relative to the repository root: the one
// code-generator's kube_codegen.sh writes into the generated files.
const headerFile = "hack/boilerplate.go.txt"

func main() {
	root := flag.String("root", ".", "the repository root")
	check := flag.Bool("check", false, "only list the files without the header, and exit 1 if there are any")
	flag.Parse()
	n, err := run(*root, *check)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "boilerplate:", err)
		os.Exit(1)
	case *check && n > 0:
		os.Exit(1)
	case !*check:
		fmt.Printf("boilerplate: added the header of %s to %d Go files\n", headerFile, n)
	}
}

// run adds the header to every Go file under root that lacks it, or with
// check only prints their paths, and returns how many there were.
func run(root string, check bool) (int, error) {
	hdr, err := os.ReadFile(filepath.Join(root, headerFile))
	if err != nil {
		return 0, err
	}
	missing, err := Missing(root, hdr)
	if err != nil {
		return 0, err
	}
	for _, path := range missing {
		if check {
			fmt.Println(path)
			continue
		}
		full := filepath.Join(root, path)
		src, err := os.ReadFile(full)
		if err != nil {
			return 0, err
		}
		st, err := os.Stat(full)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(full, WithHeader(src, hdr), st.Mode().Perm()); err != nil {
			return 0, err
		}
	}
	return len(missing), nil
}

// Missing returns the Go files under root, relative to it, that do not
// start with hdr (after their build constraints). It skips .git, _output
// and other dot or build-output directories, vendor and testdata.
func Missing(root string, hdr []byte) ([]string, error) {
	var missing []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "_output" || name == "vendor" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !HasHeader(src, hdr) {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			missing = append(missing, filepath.ToSlash(rel))
		}
		return nil
	})
	return missing, err
}

// HasHeader says whether src starts with hdr once its build constraints
// are set aside; blank lines that end hdr are not part of it.
func HasHeader(src, hdr []byte) bool {
	_, rest := splitConstraints(src)
	return bytes.HasPrefix(rest, trimHeader(hdr))
}

// WithHeader returns src with hdr and a blank line put after its build
// constraints (and their blank line), or at the top if it has none.
func WithHeader(src, hdr []byte) []byte {
	constraints, rest := splitConstraints(src)
	var out bytes.Buffer
	out.Write(constraints)
	if len(constraints) > 0 && !bytes.HasSuffix(constraints, []byte("\n\n")) {
		out.WriteByte('\n')
	}
	out.Write(trimHeader(hdr))
	out.WriteByte('\n')
	out.Write(bytes.TrimLeft(rest, "\n"))
	return out.Bytes()
}

// trimHeader is hdr ending in exactly one newline.
func trimHeader(hdr []byte) []byte {
	return append(bytes.TrimRight(hdr, "\n"), '\n')
}

// splitConstraints cuts src after its leading build constraint lines
// (//go:build and // +build) and the blank lines that follow them.
func splitConstraints(src []byte) (constraints, rest []byte) {
	end := 0
	for end < len(src) {
		line := src[end:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		trimmed := bytes.TrimSpace(line)
		isConstraint := bytes.HasPrefix(trimmed, []byte("//go:build")) || bytes.HasPrefix(trimmed, []byte("// +build"))
		if !isConstraint && (len(trimmed) > 0 || end == 0) {
			break
		}
		end += len(line)
	}
	return src[:end], src[end:]
}
