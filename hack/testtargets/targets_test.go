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

// Package testtargets checks that every test in the repository is run by
// some target: a package whose tests no target runs passes no matter what
// it holds (internal/poll's did, for months). The runners are read from
// where they are written, the Makefile, the scripts its recipes call
// (hack/test.sh and the others) and .ci/run, so that there is no second
// list to keep in step.
package testtargets

import (
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// run is one `go test` a target makes: in Dir (slash-separated, relative
// to the repository root), with build Tags, of Patterns (./x, ./x/...).
type run struct {
	Target   string // "make test", ".ci/run"
	Source   string // file:line it was read from
	Dir      string
	Tags     []string
	Patterns []string
}

func (r run) String() string {
	return fmt.Sprintf("%s (%s): in %s, -tags %q, %v", r.Target, r.Source, r.Dir, strings.Join(r.Tags, ","), r.Patterns)
}

// testFile is a _test.go file, slash-separated and relative to the root.
type testFile struct{ Dir, Name string }

func (f testFile) String() string { return path.Join(f.Dir, f.Name) }

// runsOf reads the runs of every Makefile target (through the scripts its
// recipes call) and of .ci/run under root.
func runsOf(root string) ([]run, error) {
	runs, err := makefileRuns(root)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, ".ci", "run")); err == nil {
		ci, err := scriptRuns(root, ".ci/run", ".ci/run")
		if err != nil {
			return nil, err
		}
		runs = append(runs, ci...)
	}
	return runs, nil
}

var (
	makeVarRE  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$`)
	makeRuleRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+):`)
	makeRefRE  = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	scriptRE   = regexp.MustCompile(`(?:^|\s)(hack/[A-Za-z0-9_./-]+\.sh)\b`)
)

// makefileRuns reads root/Makefile: the `go test` lines of its recipes,
// and those of the scripts under hack/ that a recipe calls.
func makefileRuns(root string) ([]run, error) {
	lines, err := logicalLines(filepath.Join(root, "Makefile"), "#")
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, l := range lines {
		if m := makeVarRE.FindStringSubmatch(l.text); m != nil && !strings.HasPrefix(l.text, "\t") {
			vars[m[1]] = m[2]
		}
	}
	expand := func(s string) string {
		for range 5 { // variables that name variables
			s = makeRefRE.ReplaceAllStringFunc(s, func(ref string) string {
				if v, ok := vars[makeRefRE.FindStringSubmatch(ref)[1]]; ok {
					return v
				}
				return ref
			})
		}
		return s
	}
	var runs []run
	rule := ""
	for _, l := range lines {
		if !strings.HasPrefix(l.text, "\t") {
			if m := makeRuleRE.FindStringSubmatch(l.text); m != nil && !strings.Contains(l.text, ":=") {
				rule = m[1]
			}
			continue
		}
		target := "make " + rule
		text := expand(l.text)
		if r, ok := goTestRun(text, ".", nil, nil); ok {
			r.Target, r.Source = target, fmt.Sprintf("Makefile:%d", l.n)
			runs = append(runs, r)
		}
		for _, m := range scriptRE.FindAllStringSubmatch(text, -1) {
			sr, err := scriptRuns(root, m[1], target)
			if err != nil {
				return nil, err
			}
			runs = append(runs, sr...)
		}
	}
	return runs, nil
}

var (
	arrayRE = regexp.MustCompile(`^\s*(?:local\s+)?([A-Za-z_][A-Za-z0-9_]*)=\((.*)\)\s*$`)
	funcRE  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)\s*\{`)
	cdRE    = regexp.MustCompile(`^\s*cd\s+(\S+)\s*$`)
	// envAssignRE is a variable assignment before a command.
	envAssignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	// separatorRE splits a line into simple commands, subshell parentheses
	// included.
	separatorRE = regexp.MustCompile(`&&|\|\||;|\(|\)`)
)

// scriptRuns reads the bash script rel (relative to root): its `go test`
// lines (a `go test` of a function's parameters names no package and
// counts for nothing), and its calls of functions of its own whose body
// runs `go test` on the packages it is given (hack/test.sh's group). It
// follows `cd` lines;
// a cd to a directory computed by the shell ($ROOT, $(dirname ...)/..) is
// taken to be the repository root, where every script here goes first.
func scriptRuns(root, rel, target string) ([]run, error) {
	lines, err := logicalLines(filepath.Join(root, filepath.FromSlash(rel)), "#")
	if err != nil {
		return nil, err
	}
	arrays := map[string][]string{}
	var funcs []string // functions whose body runs go test
	for i := 0; i < len(lines); i++ {
		if m := funcRE.FindStringSubmatch(lines[i].text); m != nil {
			for j := i + 1; j < len(lines) && lines[j].text != "}"; j++ {
				if strings.Contains(lines[j].text, "go test") {
					funcs = append(funcs, m[1])
					break
				}
			}
		}
		if m := arrayRE.FindStringSubmatch(lines[i].text); m != nil {
			arrays[m[1]] = shellWords(m[2], arrays)
		}
	}
	var runs []run
	dir := "."
	for _, l := range lines {
		if m := cdRE.FindStringSubmatch(l.text); m != nil {
			if strings.Contains(m[1], "$") {
				dir = "."
			} else {
				dir = path.Join(dir, strings.Trim(m[1], `"'`))
			}
			continue
		}
		if r, ok := goTestRun(l.text, dir, funcs, arrays); ok {
			r.Target, r.Source = target, fmt.Sprintf("%s:%d", rel, l.n)
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// goTestRun finds a `go test` (or a call of one of funcs) in a shell line
// and returns what it tests, in dir or in the directory of a `cd X &&`
// before it on the line.
func goTestRun(line, dir string, funcs []string, arrays map[string][]string) (run, bool) {
	for _, seg := range separatorRE.Split(line, -1) {
		words := shellWords(seg, arrays)
		for len(words) > 0 && envAssignRE.MatchString(words[0]) {
			words = words[1:] // CGO_ENABLED=0 go test ...
		}
		if len(words) == 0 {
			continue
		}
		if words[0] == "cd" && len(words) == 2 {
			dir = path.Join(dir, words[1])
			continue
		}
		at := -1
		for i, w := range words {
			if w == "go" && i+1 < len(words) && words[i+1] == "test" {
				at = i + 2
				break
			}
		}
		if at < 0 && slices.Contains(funcs, words[0]) {
			at = 1
		}
		if at < 0 {
			continue
		}
		r := run{Dir: dir}
		for i := at; i < len(words); i++ {
			w := words[i]
			switch {
			case w == "-tags" && i+1 < len(words):
				r.Tags = strings.FieldsFunc(words[i+1], func(c rune) bool { return c == ',' || c == ' ' })
				i++
			case strings.HasPrefix(w, "-tags="):
				r.Tags = strings.FieldsFunc(strings.TrimPrefix(w, "-tags="), func(c rune) bool { return c == ',' || c == ' ' })
			case w == "." || strings.HasPrefix(w, "./"):
				r.Patterns = append(r.Patterns, w)
			}
		}
		return r, len(r.Patterns) > 0
	}
	return run{}, false
}

// shellWords splits s into words as bash would for the simple lines of our
// scripts: quotes removed, "${NAME[@]}" replaced by the array's words.
func shellWords(s string, arrays map[string][]string) []string {
	var out []string
	for _, w := range strings.Fields(s) {
		w = strings.Trim(w, `"'`)
		if strings.HasPrefix(w, "${") && strings.HasSuffix(w, "[@]}") {
			out = append(out, arrays[strings.TrimSuffix(strings.TrimPrefix(w, "${"), "[@]}")]...)
			continue
		}
		out = append(out, w)
	}
	return out
}

type logicalLine struct {
	n    int // the first physical line's number
	text string
}

// logicalLines reads a file's lines with backslash continuations joined
// and comment lines (starting with comment, after blanks) left out.
func logicalLines(file, comment string) ([]logicalLine, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []logicalLine
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(data), "\n") {
		if cur.Len() == 0 {
			start = i + 1
			if strings.HasPrefix(strings.TrimSpace(line), comment) {
				continue
			}
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, logicalLine{n: start, text: cur.String()})
		cur.Reset()
	}
	return out, nil
}

// testFiles lists every _test.go file under root, in every module, skipping
// what the go command skips (testdata, names starting with . or _) and
// root/_output.
func testFiles(root string) ([]testFile, error) {
	var out []testFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			out = append(out, testFile{Dir: filepath.ToSlash(rel), Name: name})
		}
		return nil
	})
	return out, err
}

// moduleOf is the directory of the go.mod that holds dir, "" if none.
func moduleOf(root, dir string) string {
	for d := dir; ; d = path.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(d), "go.mod")); err == nil {
			return d
		}
		if d == "." {
			return ""
		}
	}
}

// covers reports whether r runs the test file f: one of its patterns names
// f's package (./... stops at other modules, as the go command does) and
// the file's build constraints hold with r's tags on linux.
func (r run) covers(root string, f testFile) bool {
	ctx := build.Default
	ctx.GOOS, ctx.BuildTags = "linux", r.Tags
	named := false
	for _, p := range r.Patterns {
		recursive := p == "./..." || strings.HasSuffix(p, "/...")
		base := path.Join(r.Dir, strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/"))
		switch {
		case f.Dir == base:
			named = true
		case recursive && (base == "." || strings.HasPrefix(f.Dir, base+"/")):
			named = moduleOf(root, f.Dir) == moduleOf(root, r.Dir)
		}
		if named {
			break
		}
	}
	if !named {
		return false
	}
	ok, err := ctx.MatchFile(filepath.Join(root, filepath.FromSlash(f.Dir)), f.Name)
	return err == nil && ok
}

// unrun lists the test files under root that none of runs runs.
func unrun(root string, runs []run) ([]testFile, error) {
	files, err := testFiles(root)
	if err != nil {
		return nil, err
	}
	var out []testFile
	for _, f := range files {
		if !slices.ContainsFunc(runs, func(r run) bool { return r.covers(root, f) }) {
			out = append(out, f)
		}
	}
	return out, nil
}
